/* qnn-debug capture hook: the C ABI a runtime links against (docs/c-api.md).
 *
 * Every function returns a status code and never throws, aborts or crashes, whatever it is fed.
 * On failure, qd_last_error() gives a message for the calling thread. qd_capture_tensor copies
 * the tensor's bytes before it returns (runtimes reuse buffers on every execute); background
 * threads parse the name, compute stats and checksum, and write the store. Several threads may
 * call the functions on one session at once, qd_session_close included (docs/c-api.md,
 * section 1). A qd_session* is a checked handle: once closed, calls with it are refused.
 *
 * "Committed" below means written and flushed by HDF5: it survives a crash or kill of the
 * process. Surviving a power loss also needs the fsync that qd_session_close does. */
#ifndef QNN_DEBUG_CAPTURE_H_
#define QNN_DEBUG_CAPTURE_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 2: qd_tensor starts with struct_size and can carry explicit debug handles.
 * 3: qd_tensor.role (a struct of ABI 2's size is still accepted: roles then come from names).
 * 4: qd_record_profile, a profile event with the runtime's instruction index. */
#define QD_CAPTURE_ABI_VERSION 4
/* The oldest ABI whose programs run unchanged with this library: the shared library's SONAME
 * version (libqd_capture.so.2), which changes only when old programs would break. */
#define QD_CAPTURE_ABI_COMPAT_VERSION 2

/* The most entries a list handed in may have: qd_tensor.handle_count, a profile event's
 * handle_count, a qd_graph_node's input_count, output_count and handle_count. A larger count is
 * refused (QD_ERR_INVALID_ARGUMENT) before the list is read. */
#define QD_MAX_LIST_COUNT 65536u

typedef enum qd_status {
  QD_OK = 0,
  QD_ERR_INVALID_ARGUMENT = 1, /* the call's arguments are malformed; nothing was queued */
  QD_ERR_IO = 2,               /* the store cannot be written (disk full, permissions...) */
  QD_ERR_CORRUPT = 3,
  QD_ERR_NOT_FOUND = 4, /* the handle map file does not exist */
  QD_ERR_STATE = 5,     /* e.g. qd_end_run with no run open, qd_begin_run twice */
  QD_DROPPED = 6,       /* not a failure: drop policy, queue full, tensor counted as dropped */
  QD_ERR_NO_MEMORY = 7,
  QD_ERR_INTERNAL = 8
} qd_status;

typedef enum qd_full_queue_policy {
  QD_FULL_QUEUE_BLOCK = 0, /* wait for the writer: nothing is lost, the runtime may stall */
  QD_FULL_QUEUE_DROP = 1   /* drop the tensor and count it: the runtime never waits */
} qd_full_queue_policy;

typedef enum qd_quant_convention {
  QD_QUANT_QNN_OFFSET = 0, /* real = (q + offset) * scale, offset = -zero_point (QNN) */
  QD_QUANT_ZERO_POINT = 1  /* real = (q - zero_point) * scale (PyTorch, ExecuTorch) */
} qd_quant_convention;

/* Opaque: a handle (an id the library never reuses), not a pointer to dereference. */
typedef struct qd_session qd_session;

typedef struct qd_session_options {
  uint32_t struct_size; /* sizeof(qd_session_options), set by qd_session_options_init */
  const char* path;     /* the store to create (truncated if it exists) */
  /* "debug-id" (when NULL), "executorch-qnn", "qnn-sanitized" or "custom" (docs/naming.md) */
  const char* naming;
  const char* custom_pattern;  /* RE2 with named groups `handle` and optionally `output` */
  const char* handle_map_path; /* optional JSON {"tensor name": handle or [handles]} */
  /* bytes in flight: tensor data plus each queued item's bookkeeping (about 450 bytes for a small
   * tensor); 0: 64 MiB */
  uint64_t queue_budget_bytes;
  qd_full_queue_policy full_queue_policy;
  const char* producer; /* store metadata, each optional */
  const char* backend;
  const char* soc;
  const char* model;
  int32_t deflate_level; /* 0 (default): off; 1-9: HDF5 deflate, far slower than the disk */
  /* 1 (default): writeback starts at every flush point and qd_session_close fsyncs, so what was
   * committed survives a power loss. 0: the page cache decides, for a host that can recreate
   * the data (an importer whose inputs stay on disk); a killed process still loses nothing
   * committed. */
  uint32_t durable;
} qd_session_options;

typedef struct qd_quantization {
  /* Entries in scales and offsets. 0: not quantized (the rest is ignored); else 1 with axis < 0
   * (per-tensor) or dims[axis] (per-axis), checked against the shape before either is read. */
  uint32_t count;
  int32_t axis;           /* channel axis for per-axis encodings, -1 for per-tensor */
  const double* scales;   /* count entries, stored as given (the host-side lint judges them) */
  const int32_t* offsets; /* count entries, meaning set by convention */
  uint8_t bitwidth;       /* 0: the dtype's width */
  uint8_t convention;     /* qd_quant_convention */
} qd_quantization;

typedef enum qd_tensor_role {
  QD_ROLE_FROM_NAME = -1,
  QD_ROLE_INTERMEDIATE = 0,
  QD_ROLE_GRAPH_INPUT = 1,
  QD_ROLE_GRAPH_OUTPUT = 2
} qd_tensor_role;

typedef struct qd_tensor {
  uint32_t struct_size;      /* sizeof(qd_tensor), set by qd_tensor_init */
  const char* name;          /* any bytes; parsed by the session's naming preset */
  uint32_t dtype;            /* QNN data type code, e.g. 562 FLOAT_32, 776 SFIXED_POINT_8 */
  uint32_t rank;             /* 0..8; rank 0 is a scalar */
  const uint64_t* dims;      /* rank entries (may be NULL when rank is 0) */
  const uint8_t* axis_order; /* NULL: reference layout; else rank entries, NHWC->NCHW = 0,3,1,2 */
  const void* data;          /* nbytes bytes, copied before the call returns */
  uint64_t nbytes;           /* must equal the dims' element count in dtype (4-bit: packed) */
  int32_t output_index;      /* -1: take it from the name if the preset finds one */
  qd_quantization quant;
  /* Debug handles the producer knows. NULL (the default): parsed from the name by the session's
   * naming preset. Otherwise exactly these handle_count handles (0: none, at most
   * QD_MAX_LIST_COUNT), and the name is still parsed for the output index and the graph role. */
  const int64_t* handles;
  uint32_t handle_count;
  /* The tensor's graph role as the producer knows it; QD_ROLE_FROM_NAME (the default): the
   * naming preset's, from the name. */
  int32_t role;
} qd_tensor;

typedef struct qd_graph_node {
  const char* name;
  const char* op_type;
  const char* const* inputs; /* tensor names */
  uint32_t input_count;
  const char* const* outputs;
  uint32_t output_count;
  const int64_t* handles;
  uint32_t handle_count;
} qd_graph_node;

typedef struct qd_profile_event {
  uint32_t struct_size; /* sizeof(qd_profile_event), set by qd_profile_event_init */
  const char* name;     /* required */
  /* NULL (the default): parsed from name by the session's naming preset. Otherwise exactly
   * these handle_count handles (0: none, at most QD_MAX_LIST_COUNT). */
  const int64_t* handles;
  uint32_t handle_count;
  int64_t start; /* stored as given, on the producer's clock, in unit */
  int64_t end;
  const char* unit; /* NULL: "ns" */
  /* The runtime's index of the instruction that ran (ETDump's instruction_id): it tells two
   * calls of one op apart. -1 (the default): none known. */
  int64_t instruction_id;
} qd_profile_event;

typedef struct qd_session_stats {
  uint64_t captured;         /* tensors accepted into the queue */
  uint64_t dropped;          /* tensors dropped by the drop policy */
  uint64_t written;          /* tensors committed to the store */
  uint64_t bytes_written;    /* tensor bytes committed to the store */
  uint64_t queue_peak_bytes; /* highest queue occupancy seen (tensors larger than the queue
                                use their own buffer and are not counted) */
  uint64_t lost;             /* tensors discarded after a write error */
  qd_status writer_status; /* QD_OK, or the writer's first error (see qd_last_error after stats) */
} qd_session_stats;

/* Fills defaults and struct_size. */
void qd_session_options_init(qd_session_options* options);
/* struct_size, FLOAT_32, output_index -1 (from the name), not quantized, handles from the name,
 * everything else zero/NULL. Every qd_tensor must start from it: qd_capture_tensor refuses a
 * struct_size other than sizeof(qd_tensor) (a caller built against another ABI version). */
void qd_tensor_init(qd_tensor* tensor);
/* struct_size, handles from the name, unit "ns", instruction_id -1, everything else zero/NULL. */
void qd_profile_event_init(qd_profile_event* event);

qd_status qd_session_open(const qd_session_options* options, qd_session** out_session);
qd_status qd_begin_run(qd_session* session, const char* name);
qd_status qd_end_run(qd_session* session);
/* Outside a run, a run named "run<N>" is begun implicitly; the next qd_begin_run ends it. */
qd_status qd_capture_tensor(qd_session* session, const qd_tensor* tensor);
/* One timed op from the runtime's profiler (a struct from qd_profile_event_init). */
qd_status qd_record_profile(qd_session* session, const qd_profile_event* event);
/* The same without an instruction index. handles may be NULL: then they are parsed from name
 * with the session's naming preset. */
qd_status qd_record_profile_event(qd_session* session, const char* name, const int64_t* handles,
                                  uint32_t handle_count, int64_t start, int64_t end,
                                  const char* unit);
qd_status qd_record_memory_checkpoint(qd_session* session, const char* label, uint64_t bytes);
qd_status qd_add_graph_node(qd_session* session, const qd_graph_node* node);
/* For producers that read bare bytes: the shape of tensor `tensor_name` was guessed, not known
 * (docs/store-format.md, /shape_guesses). Readers then give no figure that depends on it. */
qd_status qd_record_shape_guess(qd_session* session, const char* tensor_name);
/* Blocks until everything captured before the call is committed to the store. */
qd_status qd_flush(qd_session* session);
qd_status qd_get_stats(qd_session* session, qd_session_stats* out_stats);
/* Ends an open run, drains the queue, commits, fsyncs, closes the store and frees the session.
 * After a write error it only closes what is there (the run stays incomplete) and frees. The
 * handle is closed afterwards in every case: calls with it (close too) return
 * QD_ERR_INVALID_ARGUMENT. Calls other threads are making on the session finish first; calls
 * they start once close has begun are refused the same way. */
qd_status qd_session_close(qd_session* session);

/* The calling thread's last error message ("" if none); valid until its next qd_ call. */
const char* qd_last_error(void);
const char* qd_status_name(qd_status status);

#ifdef __cplusplus
}
#endif

#endif /* QNN_DEBUG_CAPTURE_H_ */
