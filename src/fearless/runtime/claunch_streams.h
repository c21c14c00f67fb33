/* The default stream and a launch's function, in C (claunch_streams.c). */
#ifndef FEARLESS_CLAUNCH_STREAMS_H
#define FEARLESS_CLAUNCH_STREAMS_H

#include "claunch_common.h"

FL_INTERNAL void *function_address(PyObject *f);
FL_INTERNAL int default_stream(unsigned long long *out);
FL_INTERNAL int stream_arg(PyObject *h, unsigned long long *out);
/* use_streams(streams_globals, device_id): a method of the module (claunch.c) */
FL_INTERNAL PyObject *use_streams(PyObject *self, PyObject *args);
FL_INTERNAL int streams_intern(void);

#endif
