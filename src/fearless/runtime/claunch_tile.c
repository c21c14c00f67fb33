/* The Tile track's compiled launches (runtime/claunch.py builds them into the module): a
 * prepared launch packed and launched (`tile_launch`), and runtime/dispatch.py's warm path
 * (`tile_warm`). */
#include "claunch_tile.h"
#include "claunch_streams.h"

/* ----------------------------------------------------------------------------- Tile
 * A prepared Tile launch (runtime/tile_gpu.py's GpuLaunch): the values that change per launch
 * (pointers and scalars, already checked by the warm path) are packed at their offsets into
 * the plan's own copy of the ParamBlock buffer (extents and strides already in it), and the
 * function is launched on a (gx, gy, gz) grid of one-thread blocks (tileiras fixes the threads
 * inside the cubin). A TilePlan and its arrays are one allocation (tile_plan). */

typedef struct {
    launch_fn launch;
    void *function;
    unsigned grid[3];
    char *buffer;
    void **kernel_params;
    int n;
    int *kinds;
    Py_ssize_t *offsets;
} TilePlan;

/* tile_plan(launch_address, function, gx, gy, gz, buffer_address, buffer_size, param_offsets,
 *           kinds, offsets): param_offsets, in ABI order, are where each kernel parameter lies
 * in the buffer; kinds and offsets say how and where each changing value is packed. */
FL_INTERNAL PyObject *tile_plan(PyObject *self, PyObject *args) {
    unsigned long long launch_addr, function, buffer_addr;
    unsigned gx, gy, gz;
    Py_ssize_t size;
    PyObject *param_offsets, *kinds, *offsets;
    if (!PyArg_ParseTuple(args, "KKIIIKnO!O!O!", &launch_addr, &function, &gx, &gy, &gz,
                          &buffer_addr, &size, &PyTuple_Type, &param_offsets, &PyTuple_Type,
                          &kinds, &PyTuple_Type, &offsets))
        return NULL;
    Py_ssize_t count = PyTuple_GET_SIZE(param_offsets), n = PyTuple_GET_SIZE(kinds);
    if (PyTuple_GET_SIZE(offsets) != n) {
        PyErr_SetString(PyExc_ValueError, "one offset per kind");
        return NULL;
    }
    if (size < 0) {
        PyErr_SetString(PyExc_ValueError, "a negative buffer size");
        return NULL;
    }
    /* One block, freed at once: the plan, then its kernel_params, offsets, buffer and kinds.
     * Each array starts 8-byte aligned (the buffer too: its parameters are read in place
     * through kernel_params), bar kinds, which needs only an int's alignment. */
    size_t at_offsets = sizeof(TilePlan) + (count ? count : 1) * sizeof(void *);
    size_t at_buffer = at_offsets + (n ? n : 1) * sizeof(Py_ssize_t);
    size_t at_kinds = at_buffer + ((size_t)size + 7) / 8 * 8;
    TilePlan *p = PyMem_Calloc(1, at_kinds + (n ? n : 1) * sizeof(int));
    if (p == NULL) return PyErr_NoMemory();
    p->launch = (launch_fn)(uintptr_t)launch_addr;
    p->function = (void *)(uintptr_t)function;
    p->grid[0] = gx; p->grid[1] = gy; p->grid[2] = gz;
    p->n = (int)n;
    p->kernel_params = (void **)(p + 1);
    p->offsets = (Py_ssize_t *)((char *)p + at_offsets);
    p->buffer = (char *)p + at_buffer;
    p->kinds = (int *)((char *)p + at_kinds);
    if (copy_params(p->buffer, p->kernel_params, buffer_addr, size, param_offsets)) goto fail;
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_ssize_t kind, off;
        if (as_ssize(kinds, k, &kind) || as_ssize(offsets, k, &off)) goto fail;
        int width = kind == K_PTR || kind == K_I64 || kind == K_U64 || kind == K_F64 ? 8
                  : kind == K_I32 || kind == K_U32 || kind == K_F32 ? 4
                  : kind == K_I16 || kind == K_U16 ? 2 : 1;
        if (off < 0 || off + width > size || !((kind >= K_I8 && kind <= K_F64) ||
                                               kind == K_BOOL || kind == K_PTR)) {
            PyErr_SetString(PyExc_ValueError, "a value does not fit the buffer");
            goto fail;
        }
        p->kinds[k] = (int)kind;
        p->offsets[k] = off;
    }
    return owning_capsule(p, "fearless.claunch.tile_plan", PyMem_Free);
fail:
    PyMem_Free(p);
    return NULL;
}

/* Pack `n` values into a Tile plan's buffer and launch: 0, a positive CUresult, or -1 for a
 * value that does not pack as the Python launcher would (it runs then, and says why). A NULL
 * item is an array whose pointer the warm path read: ptrs[k]. */
static long tile_pack_launch(TilePlan *p, PyObject *const *items, const long long *ptrs,
                             Py_ssize_t n, unsigned long long stream) {
    if (n != p->n) return -1;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *v = items[k];
        char *slot = p->buffer + p->offsets[k];
        int kind = p->kinds[k], ok;
        if (kind == K_PTR && v == NULL) { /* an array's pointer, read in C (ptrs) */
            ok = ptrs != NULL && ptrs[k] >= 0;
            if (ok) memcpy(slot, &ptrs[k], 8);
        } else if (v == NULL) {
            ok = 0;
        } else if (kind == K_PTR) {
            if (!PyLong_CheckExact(v)) return -1;
            unsigned long long u = PyLong_AsUnsignedLongLong(v);
            ok = !(u == (unsigned long long)-1 && PyErr_Occurred());
            if (ok) memcpy(slot, &u, 8);
        } else if (kind == K_BOOL) {
            ok = PyBool_Check(v);
            if (ok) { char c = v == Py_True; memcpy(slot, &c, 1); }
        } else if (kind == K_F32 || kind == K_F64) {
            ok = pack_float(slot, kind, v);
        } else {
            ok = pack_int(slot, kind, v);
        }
        if (!ok) { PyErr_Clear(); return -1; }
    }
    return p->launch(p->function, p->grid[0], p->grid[1], p->grid[2], 1, 1, 1, 0,
                     (void *)(uintptr_t)stream, p->kernel_params, NULL);
}

/* tile_launch(plan, values, stream) -> tile_pack_launch's answer. */
FL_INTERNAL PyObject *tile_launch(PyObject *self, PyObject *const *a, Py_ssize_t nargs) {
    TilePlan *p = plan_arg(a, nargs, 3, "tile_launch", "fearless.claunch.tile_plan");
    if (p == NULL) return NULL;
    PyObject *values = a[1];
    if (!PyList_CheckExact(values) && !PyTuple_CheckExact(values)) return PyLong_FromLong(-1);
    unsigned long long stream;
    if (!stream_arg(a[2], &stream)) return PyLong_FromLong(-1);
    return PyLong_FromLong(tile_pack_launch(p, PySequence_Fast_ITEMS(values), NULL,
                                            PySequence_Fast_GET_SIZE(values), stream));
}

/* ------------------------------------------------------------------------ Tile warm path
 * runtime/dispatch.py's Dispatcher.lookup for the common arguments, then the prepared launch:
 * each argument is read as its Python reader reads it, into the same key (the target, then
 * per parameter its part), which is looked up in `entries` (key -> (byte extent of each
 * array, the launch's tile plan), kept by WarmPath.store); the (output, other) pairs are
 * checked for overlap and the values packed and launched. Anything else returns -1 having
 * launched nothing, and Kernel.__call__ goes the Python way. */

/* W_ATOMIC: a W_TENSOR the kernel writes (claunch.py's WARM_ATOMIC) */
enum { W_PART = 1, W_TENSOR = 2, W_CONST = 3, W_SCALAR = 4, W_ATOMIC = 5 };

/* The __slots__ of fl.Tensor and Partition the warm path reads, by their member offsets:
 * a read is then one load instead of an attribute lookup. */
enum { T_DTYPE, T_ON_DEVICE, T_MOVED, T_PTR, T_SHAPE, T_OWNER, P_GIVEN_BACK, P_TENSOR, P_TILE,
       P_GRID, P_GROUP, NSLOTS };
static const char *slot_names[NSLOTS] = {"_dtype", "_on_device", "_moved", "_ptr", "_shape",
                                         "_owner", "_given_back", "tensor", "tile", "grid",
                                         "group"};

typedef struct {
    int n, npairs;
    int *kinds;
    PyObject *wants;       /* per parameter: its fl dtype (arrays) or None */
    PyObject *torch_wants; /* per parameter: its torch dtype, or None */
    int *dl_wants;         /* per parameter: its DLPack dtype (code << 8 | bits), or -1 */
    int *pairs;
    PyObject *entries, *part_type, *tensor_type, *torch_type, *target;
    long device;
    Py_ssize_t slots[NSLOTS]; /* member offsets */
    int slots_ok;             /* all of them found: else no warm path in C */
    /* the last key found in `entries` and its entry (strong): a call whose arguments make
     * the same key launches without building it (tile_warm_forget drops them) */
    PyObject *last_key, *last_entry;
} Warm;

static PyObject *s_is_cuda;

/* Frees the Warm `owned` and what it owns (a field tile_warm_plan did not reach is NULL). */
static void warm_release(void *owned) {
    Warm *w = owned;
    Py_XDECREF(w->wants); Py_XDECREF(w->torch_wants); Py_XDECREF(w->entries);
    Py_XDECREF(w->part_type); Py_XDECREF(w->tensor_type); Py_XDECREF(w->torch_type);
    Py_XDECREF(w->target); Py_XDECREF(w->last_key); Py_XDECREF(w->last_entry);
    PyMem_Free(w->kinds);
    PyMem_Free(w->dl_wants);
    PyMem_Free(w->pairs);
    PyMem_Free(w);
}

/* tile_warm_plan(kinds, wants, torch_wants, dl_wants, pairs, entries, part_type,
 *                tensor_type, torch_type, target, device) */
FL_INTERNAL PyObject *tile_warm_plan(PyObject *self, PyObject *args) {
    PyObject *kinds, *wants, *torch_wants, *dl_wants, *pairs, *entries, *part_type,
        *tensor_type, *torch_type, *target;
    long device;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!O!OOOOl", &PyTuple_Type, &kinds, &PyTuple_Type,
                          &wants, &PyTuple_Type, &torch_wants, &PyTuple_Type, &dl_wants,
                          &PyTuple_Type, &pairs, &PyDict_Type, &entries, &part_type,
                          &tensor_type, &torch_type, &target, &device))
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(kinds);
    if (n > 64 || PyTuple_GET_SIZE(wants) != n || PyTuple_GET_SIZE(torch_wants) != n ||
        PyTuple_GET_SIZE(dl_wants) != n) {
        PyErr_SetString(PyExc_ValueError, "one kind and dtype per parameter, at most 64");
        return NULL;
    }
    Warm *w = PyMem_Calloc(1, sizeof(Warm));
    if (w == NULL) return PyErr_NoMemory();
    w->n = (int)n;
    w->kinds = PyMem_Calloc(n ? n : 1, sizeof(int));
    w->dl_wants = PyMem_Calloc(n ? n : 1, sizeof(int));
    w->pairs = int_rows(pairs, 2, (int)n);
    if (w->kinds == NULL || w->dl_wants == NULL || w->pairs == NULL) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto fail;
    }
    w->npairs = (int)PyTuple_GET_SIZE(pairs);
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_ssize_t kind, dl;
        if (as_ssize(kinds, k, &kind) || as_ssize(dl_wants, k, &dl)) goto fail;
        w->kinds[k] = (int)kind;
        w->dl_wants[k] = (int)dl;
    }
    w->slots_ok = 1;
    for (int k = 0; k < NSLOTS; k++) {
        w->slots[k] = slot_offset(k < P_GIVEN_BACK ? tensor_type : part_type, slot_names[k]);
        w->slots_ok &= w->slots[k] >= 0;
    }
    Py_INCREF(wants); w->wants = wants;
    Py_INCREF(torch_wants); w->torch_wants = torch_wants;
    Py_INCREF(entries); w->entries = entries;
    Py_INCREF(part_type); w->part_type = part_type;
    Py_INCREF(tensor_type); w->tensor_type = tensor_type;
    Py_INCREF(torch_type); w->torch_type = torch_type;
    Py_INCREF(target); w->target = target;
    w->device = device;
    return owning_capsule(w, "fearless.claunch.warm", warm_release);
fail:
    warm_release(w);
    return NULL;
}

/* tile_warm_forget(warm): `entries` changed other than by adding a key (WarmPath.store
 * cleared it): the remembered last entry may be gone. */
FL_INTERNAL PyObject *tile_warm_forget(PyObject *self, PyObject *capsule) {
    Warm *w = (Warm *)PyCapsule_GetPointer(capsule, "fearless.claunch.warm");
    if (w == NULL) return NULL;
    Py_CLEAR(w->last_key);
    Py_CLEAR(w->last_entry);
    Py_RETURN_NONE;
}

/* Slot `k` of `o` (borrowed; NULL when unset). */
#define SLOT(w, o, k) (*(PyObject **)((char *)(o) + (w)->slots[k]))

/* What the read of one array argument found: its pointer and the parts of its key, borrowed
 * (slots, the DLPack view's dims) or owned (`owned`: the shape from torch's accessors). */
typedef struct {
    long long ptr;
    PyObject *shape; /* NULL for a DLPack view: ndim and dims instead */
    const int64_t *dims;
    int ndim, owned;
    int absent; /* None for an optional array: key part None, no payload, start 0 */
    PyObject *tile, *grid, *group; /* a Part's */
} Arg;

/* An fl.Tensor `t` on the GPU of dtype `want`: its pointer and shape into `r`. */
static int read_fl(Warm *w, PyObject *t, PyObject *want, Arg *r) {
    if (SLOT(w, t, T_DTYPE) != want || SLOT(w, t, T_ON_DEVICE) != Py_True) return 0;
    PyObject *ptr = SLOT(w, t, T_PTR), *shape = SLOT(w, t, T_SHAPE);
    if (ptr == NULL || !PyLong_CheckExact(ptr) || shape == NULL) return 0;
    unsigned long u = PyLong_AsUnsignedLong(ptr);
    if (u == (unsigned long)-1 && PyErr_Occurred()) return 0;
    r->ptr = (long long)u;
    r->shape = shape;
    return r->ptr >= 0;
}

/* A torch tensor `o` on the GPU of parameter i's dtype, C-contiguous: DLPack's view, else
 * torch's accessors (the shape then owned). */
static int read_torch_tensor(Warm *w, int i, PyObject *o, DLTensorABI *view, Arg *r) {
    int verdict = dl_read(o, w->dl_wants[i], w->device, &r->ptr, view);
    if (verdict == DL_OK) {
        r->dims = view->shape;
        r->ndim = view->ndim;
        return 1;
    }
    long long device;
    if (verdict == DL_REFUSED || !attr_is(o, s_is_cuda, 0, Py_True) ||
        !attr_long(o, s_get_device, 1, &device) || device != w->device ||
        !attr_is(o, s_tdtype, 0, PyTuple_GET_ITEM(w->torch_wants, i)) ||
        !attr_is(o, s_is_contiguous, 1, Py_True) || !attr_long(o, s_data_ptr, 1, &r->ptr))
        return 0;
    r->shape = PyObject_GetAttr(o, s_tshape);
    r->owned = r->shape != NULL;
    return r->owned;
}

/* Whether `a` and `b` are equal (identity first; a failed comparison is not equal). */
static int same(PyObject *a, PyObject *b) {
    if (a == b) return 1;
    int eq = PyObject_RichCompareBool(a, b, Py_EQ);
    if (eq < 0) PyErr_Clear();
    return eq == 1;
}

/* Whether an array's read is the key part `part`: (pointer mod 16, shape[, tile, grid,
 * group]). */
static int array_matches(const Arg *r, int is_part, PyObject *part) {
    if (!PyTuple_CheckExact(part) || PyTuple_GET_SIZE(part) != (is_part ? 5 : 2)) return 0;
    if (PyLong_AsLong(PyTuple_GET_ITEM(part, 0)) != (r->ptr & 15)) return 0;
    PyObject *shape = PyTuple_GET_ITEM(part, 1);
    if (r->shape != NULL) {
        if (!same(r->shape, shape)) return 0;
    } else {
        if (!PyTuple_CheckExact(shape) || PyTuple_GET_SIZE(shape) != r->ndim) return 0;
        for (int k = 0; k < r->ndim; k++)
            if (PyLong_AsLongLong(PyTuple_GET_ITEM(shape, k)) != r->dims[k]) return 0;
    }
    return !is_part || (same(r->tile, PyTuple_GET_ITEM(part, 2)) &&
                        same(r->grid, PyTuple_GET_ITEM(part, 3)) &&
                        same(r->group, PyTuple_GET_ITEM(part, 4)));
}

/* An array's key part (new), as runtime/arg_keys.py's readers make it. */
static PyObject *array_part(const Arg *r, int is_part) {
    PyObject *low = PyLong_FromLongLong(r->ptr & 15);
    PyObject *shape = r->shape != NULL ? (Py_XINCREF(r->shape), r->shape) : NULL;
    if (r->shape == NULL) {
        DLTensorABI t = {.ndim = r->ndim, .shape = (int64_t *)r->dims};
        shape = dl_shape(&t);
    }
    PyObject *part = NULL;
    if (low != NULL && shape != NULL)
        part = is_part ? PyTuple_Pack(5, low, shape, r->tile, r->grid, r->group)
                       : PyTuple_Pack(2, low, shape);
    Py_XDECREF(low);
    Py_XDECREF(shape);
    return part;
}

/* The entry of this call's key: the last one when every part matches it, else the one found
 * in `entries` under the key built from the reads (then remembered). Borrowed, or NULL. */
static PyObject *find_entry(Warm *w, PyObject *args, const Arg *reads) {
    PyObject *last = w->last_key;
    if (last != NULL) {
        int match = 1;
        for (int i = 0; i < w->n && match; i++) {
            PyObject *o = PyTuple_GET_ITEM(args, i), *part = PyTuple_GET_ITEM(last, i + 1);
            switch (w->kinds[i]) {
            case W_PART: case W_TENSOR: case W_ATOMIC:
                match = reads[i].absent ? part == Py_None
                                        : array_matches(&reads[i], w->kinds[i] == W_PART, part);
                break;
            case W_CONST:
                match = PyTuple_CheckExact(part) && PyTuple_GET_SIZE(part) == 2 &&
                        PyTuple_GET_ITEM(part, 0) == (PyObject *)Py_TYPE(o) &&
                        same(o, PyTuple_GET_ITEM(part, 1));
                break;
            default:
                match = part == (PyObject *)Py_TYPE(o);
            }
        }
        if (match) return w->last_entry;
    }
    PyObject *key = PyTuple_New(w->n + 1);
    if (key == NULL) return NULL;
    Py_INCREF(w->target);
    PyTuple_SET_ITEM(key, 0, w->target);
    for (int i = 0; i < w->n; i++) {
        PyObject *o = PyTuple_GET_ITEM(args, i), *part;
        switch (w->kinds[i]) {
        case W_PART: case W_TENSOR: case W_ATOMIC:
            part = reads[i].absent ? (Py_INCREF(Py_None), Py_None)
                                   : array_part(&reads[i], w->kinds[i] == W_PART);
            break;
        case W_CONST:
            part = PyTuple_Pack(2, (PyObject *)Py_TYPE(o), o);
            break;
        default:
            part = (PyObject *)Py_TYPE(o);
            Py_INCREF(part);
        }
        if (part == NULL) { Py_DECREF(key); return NULL; }
        PyTuple_SET_ITEM(key, i + 1, part);
    }
    PyObject *entry = PyDict_GetItemWithError(w->entries, key); /* borrowed */
    if (entry == NULL) { Py_DECREF(key); return NULL; }
    Py_XSETREF(w->last_key, key);
    Py_INCREF(entry);
    Py_XSETREF(w->last_entry, entry);
    return entry;
}

FL_INTERNAL PyObject *tile_warm(PyObject *self, PyObject *const *a, Py_ssize_t nargs) {
    Warm *w = plan_arg(a, nargs, 3, "tile_warm", "fearless.claunch.warm");
    if (w == NULL) return NULL;
    PyObject *args = a[1];
    unsigned long long stream;
    if (!stream_arg(a[2], &stream)) return PyLong_FromLong(-1);
    if (!PyTuple_CheckExact(args) || PyTuple_GET_SIZE(args) != w->n) return PyLong_FromLong(-1);
    if (!w->slots_ok) return PyLong_FromLong(-1);
    Arg reads[64];
    DLTensorABI views[64];
    PyObject *items[64];
    PyObject *written[64]; /* torch's tensors the launch writes: borrowed, args holds them */
    long long ptrs[64], starts[64];
    int absent[64];
    int nvalues = 0, narrays = 0, nwritten = 0, ok = 1;
    long result = -1;
    memset(reads, 0, sizeof(Arg) * w->n);
    for (int i = 0; i < w->n && ok; i++) {
        PyObject *o = PyTuple_GET_ITEM(args, i);
        PyObject *want = PyTuple_GET_ITEM(w->wants, i);
        PyTypeObject *tp = Py_TYPE(o);
        Arg *r = &reads[i];
        switch (w->kinds[i]) {
        case W_PART: {
            PyObject *t;
            if (o == Py_None) { /* an optional Part left out, as a Tensor below */
                r->absent = 1;
                break;
            }
            ok = (PyObject *)tp == w->part_type && SLOT(w, o, P_GIVEN_BACK) == Py_None &&
                 (t = SLOT(w, o, P_TENSOR)) != NULL && (PyObject *)Py_TYPE(t) == w->tensor_type &&
                 read_fl(w, t, want, r);
            if (ok) {
                r->tile = SLOT(w, o, P_TILE), r->grid = SLOT(w, o, P_GRID);
                r->group = SLOT(w, o, P_GROUP);
                ok = r->tile != NULL && r->grid != NULL && r->group != NULL;
            }
            break;
        }
        case W_TENSOR:
        case W_ATOMIC:
            /* None: an optional array left out (arg_keys.py's reader). A required one meets
             * no entry under this key, so the Python path refuses it. */
            if (o == Py_None)
                r->absent = 1;
            else if ((PyObject *)tp == w->tensor_type)
                ok = SLOT(w, o, T_MOVED) == Py_None && read_fl(w, o, want, r);
            else
                ok = (PyObject *)tp == w->torch_type && read_torch_tensor(w, i, o, &views[i], r);
            if (ok && !r->absent && w->kinds[i] == W_ATOMIC) {
                PyObject *t = torch_write(o, w->tensor_type, w->slots[T_OWNER]);
                ok = t != NULL;
                if (ok && t != Py_None) written[nwritten++] = t;
            }
            break;
        case W_CONST:
            break;
        default: /* W_SCALAR */
            ok = tp == &PyFloat_Type || tp == &PyLong_Type || tp == &PyBool_Type;
            items[nvalues++] = o; /* borrowed: args holds it */
        }
        if (ok && w->kinds[i] != W_CONST && w->kinds[i] != W_SCALAR) { /* an array */
            absent[narrays] = r->absent;
            if (!r->absent) {
                items[nvalues] = NULL;
                ptrs[nvalues++] = r->ptr;
            }
            starts[narrays++] = r->ptr;
        }
    }
    PyObject *entry = ok ? find_entry(w, args, reads) : NULL;
    if (entry == NULL || !PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != 2) goto done;
    PyObject *nbytes = PyTuple_GET_ITEM(entry, 0);
    if (!PyTuple_CheckExact(nbytes) || PyTuple_GET_SIZE(nbytes) != narrays) goto done;
    for (int k = 0; k < w->npairs; k++) {
        int o = w->pairs[2 * k], t = w->pairs[2 * k + 1];
        if (o >= narrays || t >= narrays) goto done;
        if (absent[o] || absent[t]) continue; /* a left-out array overlaps nothing */
        long long no = PyLong_AsLongLong(PyTuple_GET_ITEM(nbytes, o));
        long long nt = PyLong_AsLongLong(PyTuple_GET_ITEM(nbytes, t));
        if (PyErr_Occurred()) goto done;
        /* an overlap, or a zero-size array: Python's find_overlap decides */
        if (no == 0 || nt == 0 || (starts[o] < starts[t] + nt && starts[t] < starts[o] + no))
            goto done;
    }
    TilePlan *p = (TilePlan *)PyCapsule_GetPointer(PyTuple_GET_ITEM(entry, 1),
                                                  "fearless.claunch.tile_plan");
    if (p == NULL) goto done;
    result = tile_pack_launch(p, items, ptrs, nvalues, stream);
    if (result == 0) bump_versions(written, nwritten);
done:
    if (PyErr_Occurred()) PyErr_Clear();
    for (int i = 0; i < w->n; i++)
        if (reads[i].owned) Py_DECREF(reads[i].shape);
    return PyLong_FromLong(result);
}

FL_INTERNAL int tile_intern(void) {
#define INTERN(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return -1;
    INTERN(s_is_cuda, "is_cuda")
#undef INTERN
    return 0;
}
