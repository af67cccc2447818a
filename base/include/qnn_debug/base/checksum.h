// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78, the iSCSI/ext4 CRC). Chosen over zlib's
// CRC-32 because x86 (SSE4.2) and ARMv8 compute it in hardware: it must keep up with the disk.
#pragma once

#include <cstddef>
#include <cstdint>

namespace qd {

// Extends `crc` (0 to start) with `size` bytes; crc32c("123456789") == 0xE3069283.
uint32_t crc32c_extend(uint32_t crc, const void* data, size_t size);
inline uint32_t crc32c(const void* data, size_t size) { return crc32c_extend(0, data, size); }
// The CRC of A followed by B from crc32c(A), crc32c(B) and B's length: what lets pieces of one
// tensor be checked on different threads and still be held to the CRC of the whole.
uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t size_b);

}  // namespace qd
