/* SIMT launch plans, in C: fearless's compiled warm launcher (runtime/claunch.py builds it at
 * first use, as Triton builds its launcher).
 *
 * `launch(plan, function, fast, gx, gy, gz, bx, by, bz, nthreads, args, stream)` does what the
 * generated Python launcher of runtime/launch.py does for the common case, without the
 * interpreter: reads each array argument (an fl.Tensor's fields, or a plain torch.Tensor's
 * accessors) and each int or float scalar, checks dtype, device, contiguity and range, runs
 * the borrow check on the (output, other) pairs, checks the `requires=` relations between
 * lengths, picks the fast variant (`fast`, or None) when its length assumptions hold, packs
 * the values into the plan's parameter buffer and calls cuLaunchKernel. It returns 0 when the kernel was launched, a positive
 * CUresult when the driver refused, and -1 when anything is not the common case or not
 * right: then nothing was launched, and the Python launcher runs, which explains every error.
 * The GIL is held throughout, so the shared buffer needs no other lock.
 */
#include "claunch_simt.h"
#include "claunch_streams.h"

typedef struct {
    int kind;
    Py_ssize_t off0, off1, off2; /* array: pointer, extents; scalar: its slot */
    Py_ssize_t itemsize;
    PyObject *fl_dtype;    /* borrowed: the plan's spec tuple keeps them */
    PyObject *torch_dtype; /* or Py_None */
    int dl_want;           /* its DLPack dtype (code << 8 | bits), or -1 */
    int written;           /* an output: torch's memory there is autograd's (torch_write) */
} Param;

struct Plan {
    launch_fn launch;
    char *buffer;          /* the plan's own copy of the parameter buffer */
    void **kernel_params;  /* its own pointer array into `buffer` */
    Py_ssize_t size, count;
    Py_ssize_t nthreads_off;
    int n, narrays, npairs;
    Param *params;
    int *pairs; /* npairs (output, other) pairs of array indices */
    int nreq, nassume;
    int *req;    /* nreq (param, op, param): len(param) op len(param) must hold */
    int *assume; /* nassume (param, param): len >= len, for the fast variant */
    PyObject *tensor_type, *torch_type; /* torch_type: or Py_None */
    long device;
    Py_ssize_t slots[8]; /* fl.Tensor's slots read_fl reads (fl_slots), by member offset */
    int slots_ok;        /* all of them found: else read_fl refuses every fl.Tensor */
    PyObject *spec; /* kept alive */
};


/* The fl.Tensor slots read_fl reads: a read is one load instead of an attribute lookup. */
enum { S_DTYPE, S_PTR, S_DEV1D, S_SIZE, S_ON_DEVICE, S_MOVED, S_SHAPE, S_OWNER, NFL_SLOTS };
static const char *fl_slots[NFL_SLOTS] = {"_dtype", "_ptr", "_dev1d", "_size", "_on_device",
                                          "_moved", "_shape", "_owner"};

/* Frees the Plan `owned` and what it owns (a field make_plan did not reach is NULL). */
static void plan_release(void *owned) {
    Plan *p = owned;
    Py_XDECREF(p->spec);
    PyMem_Free(p->buffer);
    PyMem_Free(p->kernel_params);
    PyMem_Free(p->params);
    PyMem_Free(p->pairs);
    PyMem_Free(p->req);
    PyMem_Free(p->assume);
    PyMem_Free(p);
}

/* make_plan(launch_address, buffer_address, buffer_size, offsets, nthreads_offset, device,
 *           tensor_type, torch_type, params, pairs, requires, assumes)
 * The plan copies the Python packer's buffer (so the error record's pointer comes along) into
 * its own, and points its own pointer array at `offsets` in it: the C path never writes the
 * buffer the Python launcher packs, so the two need no lock between them (the GIL is held
 * from the first read to the end of cuLaunchKernel here).
 * params: tuple of (kind, off0, off1, off2, itemsize, fl_dtype, torch_dtype, dl_want,
 * written), dl_want the DLPack dtype (code << 8 | bits) or -1, written 1 for an output;
 * pairs: tuple of
 * (output, other) array-index pairs; requires: (param, op, param) with op 0..5 for
 * == != < <= > >=; assumes: (param, param) pairs of len >= len. */
FL_INTERNAL PyObject *simt_make_plan(PyObject *self, PyObject *args) {
    unsigned long long launch_addr, buffer_addr;
    Py_ssize_t size, nthreads_off;
    long device;
    PyObject *offsets, *tensor_type, *torch_type, *params, *pairs, *requires, *assumes;
    if (!PyArg_ParseTuple(args, "KKnO!nlOOO!O!O!O!", &launch_addr, &buffer_addr, &size,
                          &PyTuple_Type, &offsets, &nthreads_off, &device, &tensor_type,
                          &torch_type, &PyTuple_Type, &params, &PyTuple_Type, &pairs,
                          &PyTuple_Type, &requires, &PyTuple_Type, &assumes))
        return NULL;
    Plan *p = PyMem_Calloc(1, sizeof(Plan));
    if (p == NULL) return PyErr_NoMemory();
    p->launch = (launch_fn)(uintptr_t)launch_addr;
    p->size = size;
    p->count = PyTuple_GET_SIZE(offsets);
    p->buffer = PyMem_Calloc(size ? size : 1, 1);
    p->kernel_params = PyMem_Calloc(p->count ? p->count : 1, sizeof(void *));
    if (p->buffer == NULL || p->kernel_params == NULL ||
        copy_params(p->buffer, p->kernel_params, buffer_addr, size, offsets))
        goto fail;
    p->nthreads_off = nthreads_off;
    p->device = device;
    p->tensor_type = tensor_type;
    p->slots_ok = 1;
    for (int k = 0; k < NFL_SLOTS; k++) {
        p->slots[k] = slot_offset(tensor_type, fl_slots[k]);
        p->slots_ok &= p->slots[k] >= 0;
    }
    p->torch_type = torch_type;
    p->n = (int)PyTuple_GET_SIZE(params);
    p->npairs = (int)PyTuple_GET_SIZE(pairs);
    p->params = PyMem_Calloc(p->n ? p->n : 1, sizeof(Param));
    p->pairs = PyMem_Calloc(p->npairs ? 2 * p->npairs : 1, sizeof(int));
    p->spec = Py_BuildValue("(OOOO)", tensor_type, torch_type, params, pairs);
    if (p->params == NULL || p->pairs == NULL || p->spec == NULL) goto fail;
    for (int i = 0; i < p->n; i++) {
        PyObject *t = PyTuple_GET_ITEM(params, i);
        Param *q = &p->params[i];
        Py_ssize_t kind, dl_want, written;
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 9) {
            PyErr_SetString(PyExc_ValueError, "a parameter is a 9-tuple");
            goto fail;
        }
        if (as_ssize(t, 0, &kind) || as_ssize(t, 1, &q->off0) || as_ssize(t, 2, &q->off1) ||
            as_ssize(t, 3, &q->off2) || as_ssize(t, 4, &q->itemsize) ||
            as_ssize(t, 7, &dl_want) || as_ssize(t, 8, &written))
            goto fail;
        q->kind = (int)kind;
        q->written = written != 0;
        q->dl_want = (int)dl_want;
        q->fl_dtype = PyTuple_GET_ITEM(t, 5);
        q->torch_dtype = PyTuple_GET_ITEM(t, 6);
        if (q->kind == K_ARR1 || q->kind == K_ARR2) p->narrays++;
    }
    for (int i = 0; i < p->npairs; i++) {
        PyObject *t = PyTuple_GET_ITEM(pairs, i);
        Py_ssize_t a, b;
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 2 || as_ssize(t, 0, &a) ||
            as_ssize(t, 1, &b)) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "a pair is a 2-tuple");
            goto fail;
        }
        if (a < 0 || b < 0 || a >= p->narrays || b >= p->narrays) {
            PyErr_SetString(PyExc_ValueError, "a pair names an array that is not there");
            goto fail;
        }
        p->pairs[2 * i] = (int)a;
        p->pairs[2 * i + 1] = (int)b;
    }
    p->nreq = (int)PyTuple_GET_SIZE(requires);
    p->nassume = (int)PyTuple_GET_SIZE(assumes);
    p->req = int_rows(requires, 3, p->n > 6 ? p->n : 6);
    if (p->req == NULL) goto fail;
    p->assume = int_rows(assumes, 2, p->n);
    if (p->assume == NULL) goto fail;
    for (int i = 0; i < p->nreq; i++) {
        int a = p->req[3 * i], b = p->req[3 * i + 2];
        if (a >= p->n || b >= p->n || p->req[3 * i + 1] > 5) {
            PyErr_SetString(PyExc_ValueError, "a relation names a parameter that is not there");
            goto fail;
        }
    }
    return owning_capsule(p, "fearless.claunch.plan", plan_release);
fail:
    plan_release(p);
    return NULL;
}

/* The extents of a shape tuple (or torch.Size) of exactly `ndim` axes. */
static int extents(PyObject *shape, int ndim, long long *e) {
    if (shape == NULL || !PyTuple_Check(shape) || PyTuple_GET_SIZE(shape) != ndim) return 0;
    for (int k = 0; k < ndim; k++) {
        PyObject *v = PyTuple_GET_ITEM(shape, k);
        if (!PyLong_CheckExact(v)) return 0;
        e[k] = PyLong_AsLongLong(v);
        if (e[k] < 0) return 0;
    }
    return 1;
}

/* Slot `k` of fl.Tensor `o` (borrowed, NULL when unset). */
static PyObject *fl_slot(Plan *p, PyObject *o, int k) {
    return *(PyObject **)((char *)o + p->slots[k]);
}

/* A non-negative int slot. */
static int slot_long(Plan *p, PyObject *o, int k, long long *out) {
    PyObject *v = fl_slot(p, o, k);
    if (v == NULL || !PyLong_CheckExact(v)) return 0;
    *out = PyLong_AsLongLong(v);
    return *out >= 0;
}

static int read_fl(Plan *p, Param *q, PyObject *o, long long *ptr, long long *e) {
    if (!p->slots_ok) return 0;
    if (fl_slot(p, o, S_DTYPE) != q->fl_dtype || !slot_long(p, o, S_PTR, ptr)) return 0;
    if (q->kind == K_ARR1)
        return fl_slot(p, o, S_DEV1D) == Py_True && slot_long(p, o, S_SIZE, &e[0]);
    if (fl_slot(p, o, S_ON_DEVICE) != Py_True || fl_slot(p, o, S_MOVED) != Py_None) return 0;
    return extents(fl_slot(p, o, S_SHAPE), 2, e);
}

static int read_torch(Plan *p, Param *q, PyObject *o, long long *ptr, long long *e) {
    int ndim = q->kind == K_ARR1 ? 1 : 2;
    DLTensorABI t;
    int verdict = dl_read(o, q->dl_want, p->device, ptr, &t);
    if (verdict != DL_NONE) {
        if (verdict != DL_OK || t.ndim != ndim) return 0;
        for (int k = 0; k < ndim; k++) e[k] = t.shape[k];
        return 1;
    }
    long long device;
    PyObject *shape = PyObject_GetAttr(o, s_tshape);
    int ok = extents(shape, ndim, e);
    Py_XDECREF(shape);
    /* get_device() is -1 for a CPU tensor: device == p->device also says it is on the GPU */
    if (!ok || !attr_long(o, s_get_device, 1, &device) || device != p->device) return 0;
    return attr_is(o, s_is_contiguous, 1, Py_True) && attr_is(o, s_tdtype, 0, q->torch_dtype) &&
           attr_long(o, s_data_ptr, 1, ptr);
}

/* Reads, checks and packs `args[first:]` into the plan's buffer and launches `fn`, or `fast`
 * (NULL: none) when its length assumptions hold, on `stream`: what `launch` below and
 * claunch_prepared.c's `run` share. 0: launched; a CUresult: the driver refused; -1: not the
 * common case, nothing launched (no exception set). */
FL_INTERNAL long simt_pack_launch(Plan *p, PyObject *args, Py_ssize_t first, void *fn,
                                  void *fast, const unsigned *dims, long long nthreads,
                                  unsigned long long stream) {
    if (!PyTuple_CheckExact(args) || PyTuple_GET_SIZE(args) != p->n + first || p->n > 64)
        return -1;
    long long starts[64], ends[64], lens[64];
    PyObject *written[64]; /* torch's tensors the launch writes: borrowed, args holds them */
    int j = 0, nwritten = 0;
    for (int i = 0; i < p->n; i++) {
        Param *q = &p->params[i];
        PyObject *o = PyTuple_GET_ITEM(args, i + first);
        char *slot = p->buffer + q->off0;
        int ok;
        if (q->kind == K_ARR1 || q->kind == K_ARR2) {
            long long ptr = 0, e[2] = {0, 0};
            PyTypeObject *tp = Py_TYPE(o);
            if ((PyObject *)tp == p->tensor_type) ok = read_fl(p, q, o, &ptr, e);
            else if ((PyObject *)tp == p->torch_type) ok = read_torch(p, q, o, &ptr, e);
            else ok = 0;
            if (!ok) { PyErr_Clear(); return -1; }
            if (q->written) {
                PyObject *t = torch_write(o, p->tensor_type, p->slots[S_OWNER]);
                if (t == NULL) { PyErr_Clear(); return -1; }
                if (t != Py_None) written[nwritten++] = t;
            }
            long long count = q->kind == K_ARR1 ? e[0] : e[0] * e[1];
            lens[i] = e[0]; /* len(a): the extent along axis 0, as in the kernel */
            starts[j] = ptr;
            ends[j] = ptr + count * q->itemsize;
            j++;
            uint64_t u = (uint64_t)ptr;
            memcpy(slot, &u, 8);
            memcpy(p->buffer + q->off1, &e[0], 8);
            if (q->kind == K_ARR2) memcpy(p->buffer + q->off2, &e[1], 8);
        } else {
            ok = (q->kind == K_F32 || q->kind == K_F64) ? pack_float(slot, q->kind, o)
                                                          : pack_int(slot, q->kind, o);
            if (!ok) { PyErr_Clear(); return -1; }
        }
    }
    for (int k = 0; k < p->nreq; k++) {
        long long x = lens[p->req[3 * k]], y = lens[p->req[3 * k + 2]];
        int ok;
        switch (p->req[3 * k + 1]) {
        case 0: ok = x == y; break;
        case 1: ok = x != y; break;
        case 2: ok = x < y; break;
        case 3: ok = x <= y; break;
        case 4: ok = x > y; break;
        default: ok = x >= y; break;
        }
        if (!ok) return -1; /* the Python launcher names the relation */
    }
    for (int k = 0; k < p->npairs; k++) {
        int o = p->pairs[2 * k], t = p->pairs[2 * k + 1];
        if (starts[o] < ends[t] && starts[t] < ends[o]) return -1;
    }
    if (fast != NULL) {
        int holds = 1;
        for (int k = 0; k < p->nassume && holds; k++)
            holds = lens[p->assume[2 * k]] >= lens[p->assume[2 * k + 1]];
        if (holds) fn = fast;
    }
    memcpy(p->buffer + p->nthreads_off, &nthreads, 8);
    long r = p->launch(fn, dims[0], dims[1], dims[2], dims[3], dims[4], dims[5], 0,
                       (void *)(uintptr_t)stream, p->kernel_params, NULL);
    if (r == 0) bump_versions(written, nwritten);
    return r;
}

FL_INTERNAL PyObject *simt_launch(PyObject *self, PyObject *const *a, Py_ssize_t nargs) {
    Plan *p = plan_arg(a, nargs, 12, "launch", "fearless.claunch.plan");
    if (p == NULL) return NULL;
    unsigned dims[6];
    for (int k = 0; k < 6; k++) {
        unsigned long v = PyLong_AsUnsignedLong(a[3 + k]);
        if (v == (unsigned long)-1 && PyErr_Occurred()) { PyErr_Clear(); return PyLong_FromLong(-1); }
        dims[k] = (unsigned)v;
    }
    long long nthreads = PyLong_AsLongLong(a[9]);
    if (nthreads == -1 && PyErr_Occurred()) { PyErr_Clear(); return PyLong_FromLong(-1); }
    unsigned long long stream;
    if (!stream_arg(a[11], &stream)) return PyLong_FromLong(-1);
    void *fn = function_address(a[1]);
    void *fast = a[2] == Py_None ? NULL : function_address(a[2]);
    if (fn == NULL || (a[2] != Py_None && fast == NULL)) return PyLong_FromLong(-1);
    return PyLong_FromLong(simt_pack_launch(p, a[10], 0, fn, fast, dims, nthreads, stream));
}
