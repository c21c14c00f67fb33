/* The default stream and a launch's function, in C: what every launch reads besides its
 * arguments.
 *
 * The default stream is decided as streams.py's `default_cu_stream` decides it, from that
 * module's own globals (`use_streams` hands its dict over, so a test that rebinds them is
 * obeyed): -1 inside `fl.graph` (the Python launcher keeps the arguments alive), torch's current
 * stream once torch has initialised CUDA (a capture on it goes the Python way too, which marks
 * the pool's graphs), else 0, the legacy stream.
 */
#include "claunch_streams.h"

static PyObject *streams_globals, *device_id;
static PyObject *s_captures, *s_torch_current, *s_resolve, *s_torch_capturing;

FL_INTERNAL int streams_intern(void) {
#define INTERN(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return -1;
    INTERN(s_captures, "_captures") INTERN(s_torch_current, "_torch_current")
    INTERN(s_resolve, "_torch_current_stream") INTERN(s_torch_capturing, "_torch_capturing")
#undef INTERN
    return 0;
}

/* use_streams(streams_globals, device_id) */
FL_INTERNAL PyObject *use_streams(PyObject *self, PyObject *args) {
    PyObject *globals, *device;
    if (!PyArg_ParseTuple(args, "O!O!", &PyDict_Type, &globals, &PyLong_Type, &device))
        return NULL;
    Py_INCREF(globals);
    Py_XSETREF(streams_globals, globals);
    Py_INCREF(device);
    Py_XSETREF(device_id, device);
    Py_RETURN_NONE;
}

/* 1 and the handle of the default stream in *out; 0 and no exception: the Python launcher
 * decides (inside fl.graph, a capture, anything unexpected). */
FL_INTERNAL int default_stream(unsigned long long *out) {
    if (streams_globals == NULL) return 0;
    PyObject *n = PyDict_GetItemWithError(streams_globals, s_captures); /* borrowed */
    if (n == NULL || !PyLong_CheckExact(n) || PyLong_AsLong(n) != 0) goto python;
    PyObject *getter = PyDict_GetItemWithError(streams_globals, s_torch_current);
    PyObject *owned = NULL;
    if (getter == NULL) goto python;
    if (getter == Py_None) { /* torch not (yet) using CUDA: streams.py looks again */
        PyObject *resolve = PyDict_GetItemWithError(streams_globals, s_resolve);
        if (resolve == NULL) goto python;
        owned = PyObject_CallNoArgs(resolve);
        if (owned == NULL) goto python;
        if (owned == Py_None) {
            Py_DECREF(owned);
            *out = 0;
            return 1;
        }
        getter = owned;
    }
    PyObject *h = PyObject_CallOneArg(getter, device_id);
    Py_XDECREF(owned);
    if (h == NULL) goto python;
    unsigned long long handle = PyLong_AsUnsignedLongLong(h);
    Py_DECREF(h);
    if (handle == (unsigned long long)-1 && PyErr_Occurred()) goto python;
    if (handle != 0) { /* a stream torch may be capturing into */
        PyObject *capturing = PyDict_GetItemWithError(streams_globals, s_torch_capturing);
        if (capturing == NULL || capturing == Py_None) goto python;
        PyObject *c = PyObject_CallNoArgs(capturing);
        if (c != Py_False) { Py_XDECREF(c); goto python; }
        Py_DECREF(c);
    }
    *out = handle;
    return 1;
python:
    PyErr_Clear();
    return 0;
}

/* A CUfunction (cuda.bindings object or int) as its address; NULL and no exception: not one. */
FL_INTERNAL void *function_address(PyObject *f) {
    PyObject *as_int = PyNumber_Long(f);
    if (as_int == NULL) { PyErr_Clear(); return NULL; }
    void *address = PyLong_AsVoidPtr(as_int);
    Py_DECREF(as_int);
    if (address == NULL) PyErr_Clear();
    return address;
}

/* The stream argument of a launch: a handle, or None for the default stream (decided
 * here as streams.py would). 0 and no exception: the Python launcher must decide. */
FL_INTERNAL int stream_arg(PyObject *h, unsigned long long *out) {
    if (h == Py_None) return default_stream(out);
    *out = PyLong_AsUnsignedLongLong(h);
    if (*out == (unsigned long long)-1 && PyErr_Occurred()) { PyErr_Clear(); return 0; }
    return 1;
}
