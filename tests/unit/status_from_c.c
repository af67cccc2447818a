/* The capture API called as a C program may call it: C converts any int to an enum type, so
   qd_status_name must answer for values C++ code cannot even form without undefined behaviour. */
#include "qnn_debug/capture.h"

const char* qd_test_status_name_of_int(int value);

const char* qd_test_status_name_of_int(int value) { return qd_status_name((qd_status)value); }
