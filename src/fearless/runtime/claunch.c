/* fearless's compiled warm launcher (runtime/claunch.py builds it at first use, as Triton
 * builds its launcher).
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
#include "claunch.h"

typedef struct {
    int kind;
    Py_ssize_t off0, off1, off2; /* array: pointer, extents; scalar: its slot */
    Py_ssize_t itemsize;
    PyObject *fl_dtype;    /* borrowed: the plan's spec tuple keeps them */
    PyObject *torch_dtype; /* or Py_None */
    int dl_want;           /* its DLPack dtype (code << 8 | bits), or -1 */
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
    Py_ssize_t slots[7]; /* fl.Tensor's slots read_fl reads (fl_slots), by member offset */
    int slots_ok;        /* all of them found: else read_fl refuses every fl.Tensor */
    PyObject *spec; /* kept alive */
};


/* The fl.Tensor slots read_fl reads: a read is one load instead of an attribute lookup. */
enum { S_DTYPE, S_PTR, S_DEV1D, S_SIZE, S_ON_DEVICE, S_MOVED, S_SHAPE, NFL_SLOTS };
static const char *fl_slots[NFL_SLOTS] = {"_dtype", "_ptr", "_dev1d", "_size", "_on_device",
                                          "_moved", "_shape"};
FL_INTERNAL PyObject *s_tshape, *s_tdtype, *s_get_device, *s_is_contiguous, *s_data_ptr;

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

/* The destructor of owning_capsule's capsules: the release function is the capsule's context. */
static void release_capsule(PyObject *capsule) {
    void (*release)(void *) = (void (*)(void *))PyCapsule_GetContext(capsule);
    void *p = PyCapsule_GetPointer(capsule, PyCapsule_GetName(capsule));
    if (p != NULL && release != NULL) release(p);
}

FL_INTERNAL PyObject *owning_capsule(void *p, const char *name, void (*release)(void *)) {
    PyObject *capsule = PyCapsule_New(p, name, release_capsule);
    if (capsule == NULL) {
        release(p);
        return NULL;
    }
    PyCapsule_SetContext(capsule, (void *)release); /* cannot fail on a capsule just made */
    return capsule;
}

/* Flat ints of a tuple of `width`-tuples into a new array (NULL and an exception on error). */
FL_INTERNAL int *int_rows(PyObject *rows, int width, int limit) {
    Py_ssize_t n = PyTuple_GET_SIZE(rows);
    int *out = PyMem_Calloc(n * width + 1, sizeof(int));
    if (out == NULL) { PyErr_NoMemory(); return NULL; }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PyTuple_GET_ITEM(rows, i);
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != width) {
            PyErr_SetString(PyExc_ValueError, "a row has the wrong width");
            PyMem_Free(out);
            return NULL;
        }
        for (int k = 0; k < width; k++) {
            Py_ssize_t v;
            if (as_ssize(t, k, &v)) { PyMem_Free(out); return NULL; }
            if (v < 0 || v >= limit) {
                PyErr_SetString(PyExc_ValueError, "an index is out of range");
                PyMem_Free(out);
                return NULL;
            }
            out[i * width + k] = (int)v;
        }
    }
    return out;
}

FL_INTERNAL int as_ssize(PyObject *t, Py_ssize_t i, Py_ssize_t *out) {
    PyObject *v = PyTuple_GetItem(t, i);
    if (v == NULL) return -1;
    *out = PyLong_AsSsize_t(v);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* Copies the Python packer's buffer (`size` bytes at `address`) into `buffer` and points
 * `kernel_params` at `offsets` in it (-1 and an exception when an offset is outside). */
FL_INTERNAL int copy_params(char *buffer, void **kernel_params, unsigned long long address,
                            Py_ssize_t size, PyObject *offsets) {
    memcpy(buffer, (const void *)(uintptr_t)address, size);
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(offsets); k++) {
        Py_ssize_t off;
        if (as_ssize(offsets, k, &off)) return -1;
        if (off < 0 || off >= size) {
            PyErr_SetString(PyExc_ValueError, "an offset is outside the buffer");
            return -1;
        }
        kernel_params[k] = buffer + off;
    }
    return 0;
}

/* The plan of a fast call of `name` (`want` arguments, the plan's capsule first), or NULL and
 * an exception. */
FL_INTERNAL void *plan_arg(PyObject *const *a, Py_ssize_t nargs, Py_ssize_t want,
                           const char *name, const char *capsule) {
    if (nargs != want) {
        PyErr_Format(PyExc_TypeError, "%s takes %zd arguments", name, want);
        return NULL;
    }
    return PyCapsule_GetPointer(a[0], capsule);
}

/* The offset of `type`'s object slot `name`, or -1 when it is not one. */
FL_INTERNAL Py_ssize_t slot_offset(PyObject *type, const char *name) {
    PyObject *d = PyObject_GetAttrString(type, name);
    Py_ssize_t off = -1;
    if (d != NULL && Py_TYPE(d) == &PyMemberDescr_Type) {
        PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
        if (m->type == T_OBJECT_EX && !(m->flags & READONLY)) off = m->offset;
    }
    Py_XDECREF(d);
    PyErr_Clear();
    return off;
}

/* make_plan(launch_address, buffer_address, buffer_size, offsets, nthreads_offset, device,
 *           tensor_type, torch_type, params, pairs, requires, assumes)
 * The plan copies the Python packer's buffer (so the error record's pointer comes along) into
 * its own, and points its own pointer array at `offsets` in it: the C path never writes the
 * buffer the Python launcher packs, so the two need no lock between them (the GIL is held
 * from the first read to the end of cuLaunchKernel here).
 * params: tuple of (kind, off0, off1, off2, itemsize, fl_dtype, torch_dtype, dl_want), dl_want
 * the DLPack dtype (code << 8 | bits) or -1; pairs: tuple of
 * (output, other) array-index pairs; requires: (param, op, param) with op 0..5 for
 * == != < <= > >=; assumes: (param, param) pairs of len >= len. */
static PyObject *make_plan(PyObject *self, PyObject *args) {
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
        Py_ssize_t kind, dl_want;
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 8) {
            PyErr_SetString(PyExc_ValueError, "a parameter is an 8-tuple");
            goto fail;
        }
        if (as_ssize(t, 0, &kind) || as_ssize(t, 1, &q->off0) || as_ssize(t, 2, &q->off1) ||
            as_ssize(t, 3, &q->off2) || as_ssize(t, 4, &q->itemsize) || as_ssize(t, 7, &dl_want))
            goto fail;
        q->kind = (int)kind;
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

/* Whether an attribute (or method result when `call`) is exactly `want` (identity). */
FL_INTERNAL int attr_is(PyObject *o, PyObject *name, int call, PyObject *want) {
    PyObject *v = call ? PyObject_CallMethodNoArgs(o, name) : PyObject_GetAttr(o, name);
    if (v == NULL) return 0;
    int ok = (v == want);
    Py_DECREF(v);
    return ok;
}

/* An int attribute (or method result when `call`). */
FL_INTERNAL int attr_long(PyObject *o, PyObject *name, int call, long long *out) {
    PyObject *v = call ? PyObject_CallMethodNoArgs(o, name) : PyObject_GetAttr(o, name);
    if (v == NULL) return 0;
    int ok = PyLong_CheckExact(v);
    if (ok) {
        *out = PyLong_AsLongLong(v);
        ok = !(*out == -1 && PyErr_Occurred());
    }
    Py_DECREF(v);
    return ok;
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

/* The DLPack exchange table of tensor type `tp` (NULL: it has none, or one of another major
 * version), for the last type asked; the type and its capsule are kept alive. */
static PyTypeObject *dl_type;
static const DLExchangeABI *dl_api;

static const DLExchangeABI *dl_api_of(PyTypeObject *tp) {
    if (tp == dl_type) return dl_api;
    const DLExchangeABI *api = NULL;
    PyObject *cap = PyObject_GetAttrString((PyObject *)tp, "__dlpack_c_exchange_api__");
    if (cap != NULL && PyCapsule_IsValid(cap, "dlpack_exchange_api")) {
        const DLExchangeABI *a = PyCapsule_GetPointer(cap, "dlpack_exchange_api");
        if (a != NULL && a->version.major == 1 && a->version.minor >= 2 &&
            a->dltensor_from_py_object_no_sync != NULL)
            api = a;
    }
    PyErr_Clear();
    if (api == NULL) Py_XDECREF(cap); /* else kept: it owns the table */
    Py_INCREF(tp);
    dl_type = tp; /* the previous type's reference is leaked on purpose: its table may live */
    dl_api = api;
    return api;
}

/* Whether DLPack tensor `t` is C-contiguous as torch's is_contiguous() says: extent-1 axes
 * take any stride, and an empty tensor is contiguous. */
static int dl_contiguous(const DLTensorABI *t) {
    for (int k = 0; k < t->ndim; k++)
        if (t->shape[k] == 0) return 1;
    if (t->strides == NULL) return 1;
    int64_t expect = 1;
    for (int k = t->ndim - 1; k >= 0; k--) {
        if (t->shape[k] != 1 && t->strides[k] != expect) return 0;
        expect *= t->shape[k];
    }
    return 1;
}

/* Whether DLPack tensor `t` is on GPU `device` (kDLCUDA), of DLPack dtype `want` (code << 8 |
 * bits, one lane) and C-contiguous (dl_contiguous): DL_OK with *ptr its first element, else
 * DL_REFUSED. */
static int dl_check(const DLTensorABI *t, int want, long device, long long *ptr) {
    if (t->device.device_type != 2 /* kDLCUDA */ || t->device.device_id != device ||
        t->dtype.code != (want >> 8) || t->dtype.bits != (want & 255) || t->dtype.lanes != 1 ||
        t->ndim < 0 || t->ndim > 64 || !dl_contiguous(t))
        return DL_REFUSED;
    *ptr = (long long)((uintptr_t)t->data + t->byte_offset);
    return DL_OK;
}

/* A tensor through its type's DLPack exchange table, in one call instead of five attribute
 * reads: dl_check's verdict, with *t its shape (valid until control returns to Python), or
 * DL_NONE when the table is missing or failed (read the attributes instead). */
FL_INTERNAL int dl_read(PyObject *o, int want, long device, long long *ptr, DLTensorABI *t) {
    const DLExchangeABI *api = want < 0 ? NULL : dl_api_of(Py_TYPE(o));
    if (api == NULL) return DL_NONE;
    if (api->dltensor_from_py_object_no_sync(o, t) != 0) {
        PyErr_Clear();
        return DL_NONE;
    }
    return dl_check(t, want, device, ptr);
}

/* The shape of `t` as a tuple of ints (new), which compares and hashes as torch.Size does. */
FL_INTERNAL PyObject *dl_shape(const DLTensorABI *t) {
    PyObject *shape = PyTuple_New(t->ndim);
    for (int k = 0; shape != NULL && k < t->ndim; k++) {
        PyObject *v = PyLong_FromLongLong(t->shape[k]);
        if (v == NULL) Py_CLEAR(shape);
        else PyTuple_SET_ITEM(shape, k, v);
    }
    return shape;
}

/* torch_key(tensor): (pointer, key part) of a tensor through its type's DLPack exchange table
 * in one call, for ops/_replay.py's keys: the part is (shape, DLPack dtype as code | bits << 8 |
 * lanes << 16, device type << 32 | device id, C-contiguous as torch's is_contiguous() says,
 * pointer mod 16). None when the type has no table or the tensor does not export (then the
 * caller reads torch's accessors). */
static PyObject *torch_key(PyObject *self, PyObject *o) {
    const DLExchangeABI *api = dl_api_of(Py_TYPE(o));
    DLTensorABI t;
    if (api == NULL || api->dltensor_from_py_object_no_sync(o, &t) != 0 || t.ndim < 0) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    int contiguous = dl_contiguous(&t);
    long long ptr = (long long)((uintptr_t)t.data + t.byte_offset);
    long long dtype = t.dtype.code | (long long)t.dtype.bits << 8 | (long long)t.dtype.lanes << 16;
    long long device = (long long)t.device.device_type << 32 | (uint32_t)t.device.device_id;
    PyObject *shape = dl_shape(&t);
    if (shape == NULL) return NULL;
    return Py_BuildValue("(L(NLLOL))", ptr, shape, dtype, device,
                         contiguous ? Py_True : Py_False, ptr & 15);
}

/* dl_read for tests, on a CPU tensor taken as if it were on GPU `device`: (pointer, shape)
 * when accepted, False when refused, None when its type has no table. */
static PyObject *dl_view(PyObject *self, PyObject *args) {
    PyObject *o;
    int want;
    long device;
    if (!PyArg_ParseTuple(args, "Oil", &o, &want, &device)) return NULL;
    const DLExchangeABI *api = dl_api_of(Py_TYPE(o));
    if (api == NULL) Py_RETURN_NONE;
    DLTensorABI t;
    if (api->dltensor_from_py_object_no_sync(o, &t) != 0) return NULL;
    if (t.device.device_type != 1 /* kDLCPU */) Py_RETURN_FALSE;
    t.device.device_type = 2;
    t.device.device_id = (int32_t)device;
    long long ptr;
    if (dl_check(&t, want, device, &ptr) != DL_OK) Py_RETURN_FALSE;
    PyObject *shape = dl_shape(&t);
    return shape == NULL ? NULL : Py_BuildValue("(LN)", ptr, shape);
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

FL_INTERNAL int pack_int(char *slot, int kind, PyObject *v) {
    if (!PyLong_CheckExact(v)) return 0; /* bool, NumPy scalars...: the Python launcher */
    if (kind == K_U64) {
        unsigned long long u = PyLong_AsUnsignedLongLong(v);
        if (u == (unsigned long long)-1 && PyErr_Occurred()) return 0;
        memcpy(slot, &u, 8);
        return 1;
    }
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred())) return 0;
    switch (kind) {
    case K_I8: { if (x < INT8_MIN || x > INT8_MAX) return 0; int8_t y = (int8_t)x; memcpy(slot, &y, 1); return 1; }
    case K_I16: { if (x < INT16_MIN || x > INT16_MAX) return 0; int16_t y = (int16_t)x; memcpy(slot, &y, 2); return 1; }
    case K_I32: { if (x < INT32_MIN || x > INT32_MAX) return 0; int32_t y = (int32_t)x; memcpy(slot, &y, 4); return 1; }
    case K_I64: { memcpy(slot, &x, 8); return 1; }
    case K_U8: { if (x < 0 || x > UINT8_MAX) return 0; uint8_t y = (uint8_t)x; memcpy(slot, &y, 1); return 1; }
    case K_U16: { if (x < 0 || x > UINT16_MAX) return 0; uint16_t y = (uint16_t)x; memcpy(slot, &y, 2); return 1; }
    case K_U32: { if (x < 0 || x > UINT32_MAX) return 0; uint32_t y = (uint32_t)x; memcpy(slot, &y, 4); return 1; }
    }
    return 0;
}

FL_INTERNAL int pack_float(char *slot, int kind, PyObject *v) {
    double d;
    if (PyFloat_CheckExact(v)) d = PyFloat_AS_DOUBLE(v);
    else if (PyLong_CheckExact(v)) { d = PyLong_AsDouble(v); if (d == -1.0 && PyErr_Occurred()) return 0; }
    else return 0;
    if (kind == K_F64) { memcpy(slot, &d, 8); return 1; }
    float f = (float)d;
    if (isinf(f) && !isinf(d)) return 0; /* struct's 'f' refuses it: the Python launcher says why */
    memcpy(slot, &f, 4);
    return 1;
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
    int j = 0;
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
    return p->launch(fn, dims[0], dims[1], dims[2], dims[3], dims[4], dims[5], 0,
                     (void *)(uintptr_t)stream, p->kernel_params, NULL);
}

static PyObject *launch(PyObject *self, PyObject *const *a, Py_ssize_t nargs) {
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

static PyMethodDef methods[] = {
    {"make_plan", make_plan, METH_VARARGS, "A launch plan (see claunch.py)."},
    {"launch", (PyCFunction)(void (*)(void))launch, METH_FASTCALL, "Check, pack and launch."},
    {"dl_view", dl_view, METH_VARARGS, "dl_read on a CPU tensor, for tests."},
    {"torch_key", torch_key, METH_O, "A tensor's pointer and replay key part, via DLPack."},
    {"tile_plan", tile_plan, METH_VARARGS, "A Tile launch plan (see claunch.py)."},
    {"tile_launch", (PyCFunction)(void (*)(void))tile_launch, METH_FASTCALL,
     "Pack a Tile launch's values and launch."},
    {"tile_warm_plan", tile_warm_plan, METH_VARARGS, "A Tile warm path (see claunch.py)."},
    {"tile_warm", (PyCFunction)(void (*)(void))tile_warm, METH_FASTCALL,
     "Key, look up, check and launch a warm Tile launch."},
    {"tile_warm_forget", tile_warm_forget, METH_O, "Forget a warm path's last entry."},
    {"use_streams", use_streams, METH_VARARGS, "Decide default streams from streams.py's globals."},
    {"bind", prepared_bind, METH_VARARGS, "A prepared SIMT launch (see claunch_prepared.c)."},
    {"run", (PyCFunction)(void (*)(void))prepared_run, METH_FASTCALL, "Launch a prepared SIMT launch."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fearless_claunch", NULL, -1, methods};

PyMODINIT_FUNC PyInit__fearless_claunch(void) {
#define INTERN(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return NULL;
    INTERN(s_tshape, "shape") INTERN(s_tdtype, "dtype")
    INTERN(s_get_device, "get_device") INTERN(s_is_contiguous, "is_contiguous")
    INTERN(s_data_ptr, "data_ptr")
#undef INTERN
    if (tile_intern() < 0 || prepared_intern() < 0) return NULL;
    return PyModule_Create(&module);
}
