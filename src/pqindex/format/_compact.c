/* Optional C decoder for the Thrift compact protocol (see thrift.py).
 *
 * It knows nothing about Parquet: thrift.py compiles each struct class's
 * THRIFT table into a Spec and this module only follows it. The results must
 * be identical to the pure-Python decoder's, including which inputs fail, so
 * the checks below mirror thrift.py's one for one. Both reject varints wider
 * than 64 bits, i16/i32 values and field ids out of range, and list<bool>
 * elements that could not be re-encoded, so every value fits a C integer and
 * decode() returns None only for a start position outside the buffer.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#if PY_VERSION_HEX < 0x030C0000
#include "structmember.h"
#define MEMBER_OBJECT_EX T_OBJECT_EX
#define MEMBER_READONLY READONLY
#else
#define MEMBER_OBJECT_EX Py_T_OBJECT_EX
#define MEMBER_READONLY Py_READONLY
#endif

/* Compact protocol wire types. */
enum {
    CT_STOP = 0, CT_TRUE = 1, CT_FALSE = 2, CT_BYTE = 3, CT_I16 = 4,
    CT_I32 = 5, CT_I64 = 6, CT_DOUBLE = 7, CT_BINARY = 8, CT_LIST = 9,
    CT_SET = 10, CT_MAP = 11, CT_STRUCT = 12
};

/* Value kinds of a spec node; the numbers are shared with thrift.py. */
enum {
    K_BOOL = 0, K_I8 = 1, K_INT = 2, K_DOUBLE = 3, K_BINARY = 4,
    K_STRING = 5, K_LIST = 6, K_STRUCT = 7
};

/* Internal return codes. */
#define RC_OK 0
#define RC_ERR (-1)      /* Python exception set */
#define RC_MISMATCH (-3) /* list element type differs: keep as unknown field */

#define MAX_FID 1024      /* largest field id a Spec may name */
#define MAX_SPEC_NEST 32  /* nesting of list types within one field's type */

static PyObject *ThriftError = NULL;
static PyObject *RawField = NULL;
static PyObject *field_order = NULL;
static int max_depth = -1;

typedef struct Node {
    int kind;
    int wire;
    struct Node *elem; /* K_LIST */
    PyObject *spec;    /* K_STRUCT: a Spec */
} Node;

typedef struct {
    Py_ssize_t slot; /* index into pos_off; -1: no field with this id */
    Node *node;
    PyObject *name;
} Entry;

typedef struct {
    PyObject_HEAD
    PyTypeObject *cls;
    Py_ssize_t npos;
    Py_ssize_t *pos_off;
    Py_ssize_t nkw;
    Py_ssize_t *kw_off;
    PyObject **kw_def;
    Py_ssize_t off_unknown, off_order, off_typed_false, off_false_zero;
    Py_ssize_t nentries;
    Entry *entries;
} SpecObject;

static PyTypeObject Spec_Type;

/* ------------------------------------------------------------ errors */

static int
fail(const char *msg, Py_ssize_t offset)
{
    PyObject *exc = PyObject_CallFunction(ThriftError, "sn", msg, offset);
    if (exc != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
    return RC_ERR;
}

#define FAIL_EOF(r) fail("value runs past the end", (r)->len)

typedef struct {
    PyObject *bytes;
    const unsigned char *buf;
    Py_ssize_t len;
    PyObject **pend; /* containers kept out of the GC until decode() ends */
    Py_ssize_t npend, cappend;
} Reader;

/* Collections triggered by our own allocations would traverse the growing
 * tree again and again; it is acyclic and only we can reach it, so untrack
 * it and track it once at the end (or never: decode(..., track=False) for
 * trees kept read-only, e.g. cached footers, which no collection then walks;
 * the tree holds no cycle, so reference counting still frees all of it).
 * pend owns a reference to each entry, so nothing in it is freed before
 * retrack(). */
static void
defer_gc(Reader *r, PyObject *obj)
{
    if (!PyObject_GC_IsTracked(obj))
        return;
    if (r->npend == r->cappend) {
        Py_ssize_t cap = r->cappend ? r->cappend * 2 : 256;
        PyObject **p = PyMem_Realloc(r->pend, (size_t)cap * sizeof(PyObject *));
        if (p == NULL)
            return; /* stays tracked: only slower */
        r->pend = p;
        r->cappend = cap;
    }
    PyObject_GC_UnTrack(obj);
    r->pend[r->npend++] = Py_NewRef(obj);
}

static void
retrack(Reader *r, int track)
{
    for (Py_ssize_t i = 0; i < r->npend; i++) {
        if (track)
            PyObject_GC_Track(r->pend[i]);
        Py_DECREF(r->pend[i]);
    }
    PyMem_Free(r->pend);
    r->pend = NULL;
    r->npend = r->cappend = 0;
}

/* ------------------------------------------------------------ primitives */

/* Up to 10 bytes and 64 bits, like thrift._varint. */
static int
read_varint(Reader *r, Py_ssize_t *pos, uint64_t *out)
{
    Py_ssize_t p = *pos;
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
        unsigned b;
        if (p >= r->len)
            return FAIL_EOF(r);
        b = r->buf[p++];
        v |= (uint64_t)(b & 0x7F) << shift;
        /* the 10th byte holds only bit 63 and ends the varint */
        if (shift == 63 && b > 1)
            return fail(b & 0x80 ? "varint longer than 10 bytes" : "varint wider than 64 bits",
                        p);
        if (b < 0x80) {
            *pos = p;
            *out = v;
            return RC_OK;
        }
    }
}

static inline int64_t
zigzag(uint64_t x)
{
    return (int64_t)(x >> 1) ^ -(int64_t)(x & 1);
}

/* A length or count that must fit in what remains after *pos. */
static inline int
too_long(Reader *r, Py_ssize_t pos, uint64_t n)
{
    return n > (uint64_t)(r->len - pos);
}

static int skip(Reader *r, Py_ssize_t *pos, int wire, int depth);

/* Inside a map a bool is a whole byte, and is not depth-checked (thrift._skip_elem). */
static int
skip_elem(Reader *r, Py_ssize_t *pos, int wire, int depth)
{
    if (wire == CT_TRUE || wire == CT_FALSE) {
        if (*pos >= r->len)
            return FAIL_EOF(r);
        *pos += 1;
        return RC_OK;
    }
    return skip(r, pos, wire, depth);
}

/* Mirrors thrift.skip; every loop consumes at least one byte per turn. */
static int
skip(Reader *r, Py_ssize_t *pos, int wire, int depth)
{
    Py_ssize_t p = *pos;
    uint64_t n;

    if (depth > max_depth)
        return fail("nesting too deep", p);
    switch (wire) {
    case CT_TRUE:
    case CT_FALSE:
        return RC_OK;
    case CT_BYTE:
        if (p >= r->len)
            return FAIL_EOF(r);
        *pos = p + 1;
        return RC_OK;
    case CT_I16:
    case CT_I32:
    case CT_I64:
        return read_varint(r, pos, &n);
    case CT_DOUBLE:
        if (r->len - p < 8)
            return fail("double runs past the end", p);
        *pos = p + 8;
        return RC_OK;
    case CT_BINARY:
        if (read_varint(r, &p, &n))
            return RC_ERR;
        if (too_long(r, p, n))
            return fail("binary runs past the end", p);
        *pos = p + (Py_ssize_t)n;
        return RC_OK;
    case CT_LIST:
    case CT_SET: {
        unsigned h;
        int et;
        if (p >= r->len)
            return FAIL_EOF(r);
        h = r->buf[p++];
        n = h >> 4;
        et = h & 15;
        if (n == 15 && read_varint(r, &p, &n))
            return RC_ERR;
        if (too_long(r, p, n))
            return fail("list runs past the end", p);
        if (et == CT_TRUE || et == CT_FALSE) {
            *pos = p + (Py_ssize_t)n;
            return RC_OK;
        }
        for (uint64_t i = 0; i < n; i++)
            if (skip(r, &p, et, depth + 1))
                return RC_ERR;
        *pos = p;
        return RC_OK;
    }
    case CT_MAP: {
        unsigned kv;
        if (read_varint(r, &p, &n))
            return RC_ERR;
        if (n == 0) {
            *pos = p;
            return RC_OK;
        }
        /* 2 * n > remaining, without overflow */
        if (n > (uint64_t)(r->len - p) / 2)
            return fail("map runs past the end", p);
        if (p >= r->len)
            return FAIL_EOF(r);
        kv = r->buf[p++];
        for (uint64_t i = 0; i < n; i++) {
            if (skip_elem(r, &p, kv >> 4, depth + 1))
                return RC_ERR;
            if (skip_elem(r, &p, kv & 15, depth + 1))
                return RC_ERR;
        }
        *pos = p;
        return RC_OK;
    }
    case CT_STRUCT:
        for (;;) {
            unsigned h;
            if (p >= r->len)
                return FAIL_EOF(r);
            h = r->buf[p++];
            if (h == CT_STOP) {
                *pos = p;
                return RC_OK;
            }
            if (!(h >> 4) && read_varint(r, &p, &n))
                return RC_ERR;
            if (skip(r, &p, h & 15, depth + 1))
                return RC_ERR;
        }
    default:
        return fail("unknown wire type", p);
    }
}

/* ------------------------------------------------------------ decoding */

static int decode_struct(Reader *r, SpecObject *s, Py_ssize_t *ppos, int depth,
                         PyObject **out);

/* The elements of a list<bool> into v (a list of n NULLs) from *ppos, like
 * thrift._bool_list_read: false is 2 or 0, not both in one list; *false_zero
 * is set when it is 0. The caller has checked that n bytes remain. */
static int
read_bool_elems(Reader *r, Py_ssize_t *ppos, PyObject *v, Py_ssize_t n, int *false_zero)
{
    Py_ssize_t p = *ppos;
    int fb = -1; /* the byte this list writes false as; -1: none yet */
    for (Py_ssize_t i = 0; i < n; i++) {
        int e = r->buf[p++];
        if (e == CT_TRUE) {
            PyList_SET_ITEM(v, i, Py_NewRef(Py_True));
            continue;
        }
        if (e != fb) {
            if (e > 2)
                return fail("list<bool> element is not 0, 1 or 2", p - 1);
            if (fb != -1)
                return fail("list<bool> writes false as both 0 and 2", p - 1);
            fb = e;
        }
        PyList_SET_ITEM(v, i, Py_NewRef(Py_False));
    }
    *false_zero = fb == 0;
    *ppos = p;
    return RC_OK;
}

/* One value of node's type at *ppos (its wire type already checked); depth
 * is the enclosing struct's, as in thrift._value_read. For a field's own
 * list<bool>, *typed_false is set when its header says 2 and *false_zero when
 * its false elements are 0. */
static int
read_value(Reader *r, const Node *nd, Py_ssize_t *ppos, int depth, PyObject **out,
           int *typed_false, int *false_zero)
{
    Py_ssize_t p = *ppos;
    uint64_t n;
    PyObject *v;

    switch (nd->kind) {
    case K_I8:
        if (p >= r->len)
            return FAIL_EOF(r);
        v = PyLong_FromLong((long)(signed char)r->buf[p]);
        p += 1;
        break;
    case K_INT:
        if (p < r->len && r->buf[p] < 0x80) {
            n = r->buf[p++];
        }
        else {
            if (read_varint(r, &p, &n))
                return RC_ERR;
            /* zigzag(n) fits in k bits exactly when n < 2**k */
            if (nd->wire == CT_I16 && n >> 16)
                return fail("i16 value out of range", p);
            if (nd->wire == CT_I32 && n >> 32)
                return fail("i32 value out of range", p);
        }
        v = PyLong_FromLongLong(zigzag(n));
        break;
    case K_DOUBLE:
        if (r->len - p < 8)
            return fail("double runs past the end", p);
        {
            double d = PyFloat_Unpack8((const char *)r->buf + p, 1);
            if (d == -1.0 && PyErr_Occurred())
                return RC_ERR;
            v = PyFloat_FromDouble(d);
        }
        p += 8;
        break;
    case K_BINARY:
    case K_STRING:
        if (read_varint(r, &p, &n))
            return RC_ERR;
        if (too_long(r, p, n))
            return fail("binary runs past the end", p);
        if (nd->kind == K_BINARY)
            v = PyBytes_FromStringAndSize((const char *)r->buf + p, (Py_ssize_t)n);
        else
            v = PyUnicode_DecodeUTF8((const char *)r->buf + p, (Py_ssize_t)n,
                                     "surrogateescape");
        p += (Py_ssize_t)n;
        break;
    case K_LIST: {
        unsigned h;
        int et, rc;
        const Node *el = nd->elem;
        if (p >= r->len)
            return FAIL_EOF(r);
        h = r->buf[p++];
        n = h >> 4;
        if (n == 15 && read_varint(r, &p, &n))
            return RC_ERR;
        /* before allocating: every element takes at least one byte */
        if (too_long(r, p, n))
            return fail("list runs past the end", p);
        et = h & 15;
        if (el->kind == K_BOOL) {
            int fz = 0;
            if (et != CT_TRUE && et != CT_FALSE)
                return RC_MISMATCH;
            /* thrift.py rejects list<list<bool>> specs, so this is a field's list */
            if (typed_false == NULL || false_zero == NULL) {
                PyErr_SetString(PyExc_SystemError, "nested list<bool>");
                return RC_ERR;
            }
            v = PyList_New((Py_ssize_t)n);
            if (v == NULL)
                return RC_ERR;
            defer_gc(r, v);
            rc = read_bool_elems(r, &p, v, (Py_ssize_t)n, &fz);
            if (rc) {
                Py_DECREF(v);
                return rc;
            }
            *typed_false = et == CT_FALSE;
            *false_zero = fz;
            break;
        }
        if (et != el->wire)
            return RC_MISMATCH;
        v = PyList_New((Py_ssize_t)n);
        if (v == NULL)
            return RC_ERR;
        defer_gc(r, v);
        for (Py_ssize_t i = 0; i < (Py_ssize_t)n; i++) {
            PyObject *item;
            rc = read_value(r, el, &p, depth, &item, NULL, NULL);
            if (rc) {
                Py_DECREF(v);
                return rc;
            }
            PyList_SET_ITEM(v, i, item);
        }
        break;
    }
    case K_STRUCT:
        return decode_struct(r, (SpecObject *)nd->spec, ppos, depth + 1, out);
    default:
        PyErr_SetString(PyExc_SystemError, "bad spec node");
        return RC_ERR;
    }
    if (v == NULL)
        return RC_ERR;
    *ppos = p;
    *out = v;
    return RC_OK;
}

#define SLOT(obj, off) ((PyObject **)((char *)(obj) + (off)))

static inline void
set_slot(PyObject *obj, Py_ssize_t off, PyObject *v)
{
    PyObject *old = *SLOT(obj, off);
    *SLOT(obj, off) = v;
    Py_XDECREF(old);
}

/* An instance without running __init__: positional fields None, kw-only
 * fields their defaults, which is what cls(None, ..., None) leaves. */
static PyObject *
new_instance(Reader *r, SpecObject *s)
{
    PyObject *obj = s->cls->tp_alloc(s->cls, 0);
    if (obj == NULL)
        return NULL;
    defer_gc(r, obj);
    for (Py_ssize_t i = 0; i < s->npos; i++)
        set_slot(obj, s->pos_off[i], Py_NewRef(Py_None));
    for (Py_ssize_t i = 0; i < s->nkw; i++)
        set_slot(obj, s->kw_off[i], Py_NewRef(s->kw_def[i]));
    return obj;
}

static int
list_append_steal(PyObject **list, PyObject *item)
{
    int rc;
    if (item == NULL)
        return -1;
    if (*list == NULL && (*list = PyList_New(0)) == NULL) {
        Py_DECREF(item);
        return -1;
    }
    rc = PyList_Append(*list, item);
    Py_DECREF(item);
    return rc;
}

static int
set_tuple_slot(PyObject *obj, Py_ssize_t off, PyObject *list)
{
    PyObject *t = PyList_AsTuple(list);
    if (t == NULL)
        return -1;
    set_slot(obj, off, t);
    return 0;
}

/* Mirrors the decode_struct that thrift._decoder generates. */
static int
decode_struct(Reader *r, SpecObject *s, Py_ssize_t *ppos, int depth, PyObject **out)
{
    Py_ssize_t pos = *ppos, start = *ppos;
    PyObject *obj, *unknown = NULL, *typed_false = NULL, *false_zero = NULL;
    int64_t last = 0;
    int jumbled = 0, rc;

    if (depth > max_depth)
        return fail("nesting too deep", pos);
    obj = new_instance(r, s);
    if (obj == NULL)
        return RC_ERR;
    for (;;) {
        unsigned b;
        int t, d;
        int64_t fid;
        Py_ssize_t vstart;

        if (pos >= r->len) {
            rc = FAIL_EOF(r);
            goto error;
        }
        b = r->buf[pos++];
        if (b == CT_STOP)
            break;
        t = b & 15;
        d = b >> 4;
        /* field ids are i16 */
        if (d) {
            fid = last + d;
            if (fid > 32767) {
                rc = fail("field id out of range", pos);
                goto error;
            }
        }
        else {
            uint64_t x;
            if ((rc = read_varint(r, &pos, &x)))
                goto error;
            if (x > 0xFFFF) {
                rc = fail("field id out of range", pos);
                goto error;
            }
            fid = zigzag(x);
            if (fid <= last)
                jumbled = 1;
        }
        last = fid;
        vstart = pos;
        if (fid >= 0 && fid < s->nentries && s->entries[fid].slot >= 0) {
            const Entry *e = &s->entries[fid];
            Py_ssize_t off = s->pos_off[e->slot];
            if (e->node->kind == K_BOOL) {
                if (t == CT_TRUE || t == CT_FALSE) {
                    set_slot(obj, off, Py_NewRef(t == CT_TRUE ? Py_True : Py_False));
                    continue;
                }
            }
            else if (t == e->node->wire) {
                PyObject *v;
                int tf = 0, fz = 0;
                rc = read_value(r, e->node, &pos, depth, &v, &tf, &fz);
                if (rc == RC_OK) {
                    set_slot(obj, off, v);
                    if ((tf && list_append_steal(&typed_false, Py_NewRef(e->name)))
                        || (fz && list_append_steal(&false_zero, Py_NewRef(e->name)))) {
                        rc = RC_ERR;
                        goto error;
                    }
                    continue;
                }
                if (rc != RC_MISMATCH)
                    goto error;
                pos = vstart;
            }
        }
        if ((rc = skip(r, &pos, t, depth + 1)))
            goto error;
        {
            PyObject *raw = PyObject_CallFunction(RawField, "Liy#", (long long)fid, t,
                                                  (const char *)r->buf + vstart,
                                                  (Py_ssize_t)(pos - vstart));
            if (list_append_steal(&unknown, raw)) {
                rc = RC_ERR;
                goto error;
            }
        }
    }
    if (unknown != NULL && set_tuple_slot(obj, s->off_unknown, unknown)) {
        rc = RC_ERR;
        goto error;
    }
    if (jumbled) {
        /* rare: reuse the Python scan so the ids match by construction */
        PyObject *order = PyObject_CallFunction(field_order, "On", r->bytes, start);
        if (order == NULL) {
            rc = RC_ERR;
            goto error;
        }
        set_slot(obj, s->off_order, order);
    }
    if (typed_false != NULL && set_tuple_slot(obj, s->off_typed_false, typed_false)) {
        rc = RC_ERR;
        goto error;
    }
    if (false_zero != NULL && set_tuple_slot(obj, s->off_false_zero, false_zero)) {
        rc = RC_ERR;
        goto error;
    }
    Py_XDECREF(unknown);
    Py_XDECREF(typed_false);
    Py_XDECREF(false_zero);
    *ppos = pos;
    *out = obj;
    return RC_OK;
error:
    Py_XDECREF(unknown);
    Py_XDECREF(typed_false);
    Py_XDECREF(false_zero);
    Py_DECREF(obj);
    return rc;
}

/* ------------------------------------------------------------ Spec */

static void
node_free(Node *nd)
{
    if (nd == NULL)
        return;
    node_free(nd->elem);
    Py_XDECREF(nd->spec);
    PyMem_Free(nd);
}

/* (kind, wire) | (K_LIST, wire, elem) | (K_STRUCT, wire, Spec) */
static Node *
node_parse(PyObject *t, int in_list, int nest)
{
    Node *nd;
    long kind, wire;

    if (nest > MAX_SPEC_NEST) {
        PyErr_SetString(PyExc_ValueError, "spec nested too deeply");
        return NULL;
    }
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) < 2) {
        PyErr_SetString(PyExc_TypeError, "spec node must be a tuple");
        return NULL;
    }
    kind = PyLong_AsLong(PyTuple_GET_ITEM(t, 0));
    wire = PyLong_AsLong(PyTuple_GET_ITEM(t, 1));
    if (PyErr_Occurred())
        return NULL;
    if (kind < K_BOOL || kind > K_STRUCT || wire < 1 || wire > 12
        || (PyTuple_GET_SIZE(t) == 3) != (kind == K_LIST || kind == K_STRUCT)) {
        PyErr_SetString(PyExc_ValueError, "bad spec node");
        return NULL;
    }
    nd = PyMem_Calloc(1, sizeof(Node));
    if (nd == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    nd->kind = (int)kind;
    nd->wire = (int)wire;
    if (kind == K_LIST) {
        PyObject *sub = PyTuple_GET_ITEM(t, 2);
        /* thrift.py records typed-false and false-zero only for a field's own list */
        if (in_list && PyTuple_Check(sub) && PyTuple_GET_SIZE(sub) >= 1
            && PyLong_Check(PyTuple_GET_ITEM(sub, 0))
            && PyLong_AsLong(PyTuple_GET_ITEM(sub, 0)) == K_BOOL) {
            PyErr_SetString(PyExc_ValueError, "nested list<bool> unsupported");
            goto error;
        }
        nd->elem = node_parse(sub, 1, nest + 1);
        if (nd->elem == NULL)
            goto error;
    }
    else if (kind == K_STRUCT) {
        PyObject *sub = PyTuple_GET_ITEM(t, 2);
        if (!PyObject_TypeCheck(sub, &Spec_Type)) {
            PyErr_SetString(PyExc_TypeError, "struct node needs a Spec");
            goto error;
        }
        nd->spec = Py_NewRef(sub);
    }
    return nd;
error:
    node_free(nd);
    return NULL;
}

/* Offset of a writable object slot of cls, from its member descriptor. */
static int
slot_offset(PyTypeObject *cls, PyObject *descr, Py_ssize_t *off)
{
    PyMemberDescrObject *md;
    PyMemberDef *m;

    if (!Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
        PyErr_SetString(PyExc_TypeError, "expected a slot member descriptor");
        return -1;
    }
    md = (PyMemberDescrObject *)descr;
    m = md->d_member;
    if (!PyType_IsSubtype(cls, md->d_common.d_type) || m->type != MEMBER_OBJECT_EX
        || (m->flags & MEMBER_READONLY) || m->offset < (Py_ssize_t)sizeof(PyObject)
        || m->offset + (Py_ssize_t)sizeof(PyObject *) > cls->tp_basicsize) {
        PyErr_SetString(PyExc_TypeError, "unsupported slot");
        return -1;
    }
    *off = m->offset;
    return 0;
}

static void
Spec_dealloc(SpecObject *s)
{
    if (s->entries != NULL) {
        for (Py_ssize_t i = 0; i < s->nentries; i++) {
            node_free(s->entries[i].node);
            Py_XDECREF(s->entries[i].name);
        }
        PyMem_Free(s->entries);
    }
    if (s->kw_def != NULL) {
        for (Py_ssize_t i = 0; i < s->nkw; i++)
            Py_XDECREF(s->kw_def[i]);
        PyMem_Free(s->kw_def);
    }
    PyMem_Free(s->kw_off);
    PyMem_Free(s->pos_off);
    Py_XDECREF(s->cls);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

/* Spec(cls, positional_descrs, ((descr, default), ...),
 *      (unknown_descr, order_descr, typed_false_descr, false_zero_descr),
 *      ((fid, positional_index, node, name), ...)) */
static PyObject *
Spec_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *cls, *pos, *kw, *special, *fields;
    SpecObject *s;
    Py_ssize_t n, maxfid = -1;

    if (kwds != NULL && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "Spec takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!:Spec", &PyType_Type, &cls, &PyTuple_Type, &pos,
                          &PyTuple_Type, &kw, &PyTuple_Type, &special, &PyTuple_Type,
                          &fields))
        return NULL;
    /* tp_alloc stands in for cls(); only valid when __new__ is object's */
    if (((PyTypeObject *)cls)->tp_new != PyBaseObject_Type.tp_new
        || ((PyTypeObject *)cls)->tp_itemsize != 0 || PyTuple_GET_SIZE(special) != 4) {
        PyErr_SetString(PyExc_TypeError, "unsupported class");
        return NULL;
    }
    s = (SpecObject *)type->tp_alloc(type, 0);
    if (s == NULL)
        return NULL;
    s->cls = (PyTypeObject *)Py_NewRef(cls);

    n = PyTuple_GET_SIZE(pos);
    s->pos_off = PyMem_Calloc(n ? n : 1, sizeof(Py_ssize_t));
    if (s->pos_off == NULL)
        goto nomem;
    s->npos = n;
    for (Py_ssize_t i = 0; i < n; i++)
        if (slot_offset(s->cls, PyTuple_GET_ITEM(pos, i), &s->pos_off[i]))
            goto error;

    n = PyTuple_GET_SIZE(kw);
    s->kw_off = PyMem_Calloc(n ? n : 1, sizeof(Py_ssize_t));
    s->kw_def = PyMem_Calloc(n ? n : 1, sizeof(PyObject *));
    if (s->kw_off == NULL || s->kw_def == NULL)
        goto nomem;
    s->nkw = n;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PyTuple_GET_ITEM(kw, i);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_TypeError, "kw-only entry must be (descr, default)");
            goto error;
        }
        if (slot_offset(s->cls, PyTuple_GET_ITEM(pair, 0), &s->kw_off[i]))
            goto error;
        s->kw_def[i] = Py_NewRef(PyTuple_GET_ITEM(pair, 1));
    }
    if (slot_offset(s->cls, PyTuple_GET_ITEM(special, 0), &s->off_unknown)
        || slot_offset(s->cls, PyTuple_GET_ITEM(special, 1), &s->off_order)
        || slot_offset(s->cls, PyTuple_GET_ITEM(special, 2), &s->off_typed_false)
        || slot_offset(s->cls, PyTuple_GET_ITEM(special, 3), &s->off_false_zero))
        goto error;

    n = PyTuple_GET_SIZE(fields);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *f = PyTuple_GET_ITEM(fields, i);
        Py_ssize_t fid;
        if (!PyTuple_Check(f) || PyTuple_GET_SIZE(f) != 4) {
            PyErr_SetString(PyExc_TypeError, "field must be (fid, index, node, name)");
            goto error;
        }
        fid = PyLong_AsSsize_t(PyTuple_GET_ITEM(f, 0));
        if (fid == -1 && PyErr_Occurred())
            goto error;
        if (fid < 0 || fid > MAX_FID) {
            PyErr_SetString(PyExc_ValueError, "field id out of range");
            goto error;
        }
        if (fid > maxfid)
            maxfid = fid;
    }
    s->entries = PyMem_Calloc(maxfid + 1 > 0 ? maxfid + 1 : 1, sizeof(Entry));
    if (s->entries == NULL)
        goto nomem;
    s->nentries = maxfid + 1;
    for (Py_ssize_t i = 0; i < s->nentries; i++)
        s->entries[i].slot = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *f = PyTuple_GET_ITEM(fields, i);
        Py_ssize_t fid = PyLong_AsSsize_t(PyTuple_GET_ITEM(f, 0));
        Py_ssize_t idx = PyLong_AsSsize_t(PyTuple_GET_ITEM(f, 1));
        Entry *e = &s->entries[fid];
        if (idx == -1 && PyErr_Occurred())
            goto error;
        if (idx < 0 || idx >= s->npos || e->slot >= 0) {
            PyErr_SetString(PyExc_ValueError, "bad or duplicate field");
            goto error;
        }
        e->node = node_parse(PyTuple_GET_ITEM(f, 2), 0, 0);
        if (e->node == NULL)
            goto error;
        e->name = Py_NewRef(PyTuple_GET_ITEM(f, 3));
        e->slot = idx;
    }
    return (PyObject *)s;
nomem:
    PyErr_NoMemory();
error:
    Py_DECREF(s);
    return NULL;
}

static PyTypeObject Spec_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pqindex.format._compact.Spec",
    .tp_basicsize = sizeof(SpecObject),
    .tp_dealloc = (destructor)Spec_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A struct class's decoding table, compiled from its THRIFT table.",
    .tp_new = Spec_new,
};

/* ------------------------------------------------------------ module */

static PyObject *
mod_setup(PyObject *self, PyObject *args)
{
    PyObject *err, *raw, *order;
    int depth;
    if (!PyArg_ParseTuple(args, "OOOi:setup", &err, &raw, &order, &depth))
        return NULL;
    if (!PyExceptionClass_Check(err) || !PyCallable_Check(raw) || !PyCallable_Check(order)
        || depth < 0 || depth > 10000) {
        PyErr_SetString(PyExc_TypeError, "setup(ThriftError, RawField, field_order, max_depth)");
        return NULL;
    }
    Py_XSETREF(ThriftError, Py_NewRef(err));
    Py_XSETREF(RawField, Py_NewRef(raw));
    Py_XSETREF(field_order, Py_NewRef(order));
    max_depth = depth;
    Py_RETURN_NONE;
}

static PyObject *
mod_decode(PyObject *self, PyObject *args)
{
    PyObject *spec, *bytes, *obj = NULL;
    Py_ssize_t pos;
    Reader r;
    int rc, track = 1;

    if (!PyArg_ParseTuple(args, "O!O!n|p:decode", &Spec_Type, &spec, &PyBytes_Type, &bytes,
                          &pos, &track))
        return NULL;
    if (ThriftError == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_compact.setup() was not called");
        return NULL;
    }
    r.bytes = bytes;
    r.buf = (const unsigned char *)PyBytes_AS_STRING(bytes);
    r.len = PyBytes_GET_SIZE(bytes);
    r.pend = NULL;
    r.npend = r.cappend = 0;
    if (pos < 0 || pos > r.len)
        Py_RETURN_NONE; /* Python indexing semantics; not worth copying */
    rc = decode_struct(&r, (SpecObject *)spec, &pos, 0, &obj);
    retrack(&r, track || rc);
    if (rc)
        return NULL;
    return Py_BuildValue("Nn", obj, pos);
}

static PyMethodDef methods[] = {
    {"setup", mod_setup, METH_VARARGS,
     "setup(ThriftError, RawField, field_order, max_depth): the Python pieces the decoder uses."},
    {"decode", mod_decode, METH_VARARGS,
     "decode(spec, buf, pos, track=True) -> (obj, end), or None when the pure-Python decoder "
     "must run. track=False: the tree is left untracked by the cyclic collector."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "pqindex.format._compact",
    "C decoder for the Thrift compact protocol, driven by specs from thrift.py.", -1, methods,
};

PyMODINIT_FUNC
PyInit__compact(void)
{
    PyObject *m;
    if (PyType_Ready(&Spec_Type) < 0)
        return NULL;
    m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "Spec", (PyObject *)&Spec_Type) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
