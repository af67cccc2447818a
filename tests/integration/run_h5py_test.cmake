# Writes a store with the C API, then reads it back from Python with h5py.
execute_process(COMMAND ${WRITER} ${STORE} RESULT_VARIABLE written)
if(NOT written EQUAL 0)
  message(FATAL_ERROR "qd_write_known_store failed (${written})")
endif()
execute_process(COMMAND ${PYTHON} ${SCRIPT} ${STORE} RESULT_VARIABLE checked)
if(NOT checked EQUAL 0)
  message(FATAL_ERROR "read_store.py failed (${checked})")
endif()
