/* Optional C kernel for the RLE / bit-packed hybrid encoding (see hybrid.py).
 *
 * hybrid.py's numpy code is the reference: the run walk below accepts and
 * rejects the same streams, with the same ValueError messages (a header past
 * the data, a bit-packed run whose needed bytes are missing, an RLE value that
 * is missing or wider than the bit width, runs that end before ``count``
 * values). Every byte read is checked against the stream's end or the
 * buffer's length; lengths from the data are 64-bit and checked before use.
 * Buffers come through the buffer protocol (no copy) and the scans run with
 * the GIL released, so row groups on a thread pool decode in parallel.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <math.h>
#include <string.h>

/* Error codes of the walk; turned into a ValueError once the GIL is held. */
enum {
    E_OK = 0, E_HEADER, E_ENDED, E_PACKED, E_RLE_SHORT, E_RLE_WIDE, E_LIMIT, E_NOMEM
};

/* One stream being walked. */
typedef struct {
    const uint8_t *data;
    int64_t len; /* the buffer's length: reads never go past it */
    int64_t pos, end;
    int width;
    int64_t count, done;
    uint64_t bad_value; /* E_RLE_WIDE, E_LIMIT: the value */
    int64_t limit;      /* E_LIMIT: the bound it broke */
} Stream;

/* The run just read: ``take`` values (those past ``count`` cut off). */
typedef struct {
    int packed;
    int64_t take;
    uint32_t value; /* RLE */
    int64_t body;   /* bit-packed: offset of its first value byte */
} Run;

static inline uint64_t
load_le64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

/* The next run; the caller checks done < count first. */
static int
next_run(Stream *s, Run *r)
{
    uint64_t header = 0;
    int shift = 0;
    int64_t p = s->pos;
    int64_t left = s->count - s->done;

    if (p >= s->end)
        return E_ENDED;
    for (;;) {
        uint8_t b;
        if (p >= s->end || shift > 35)
            return E_HEADER;
        b = s->data[p++];
        header |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80))
            break;
        shift += 7;
    }
    if (header & 1) {
        /* header < 2^42: these products stay far below 2^63 */
        int64_t groups = (int64_t)(header >> 1);
        int64_t take = groups * 8 < left ? groups * 8 : left;
        int64_t need = (take * s->width + 7) / 8;
        if (need > s->end - p)
            return E_PACKED;
        r->packed = 1;
        r->take = take;
        r->body = p;
        s->pos = p + groups * s->width;
        s->done += take;
    }
    else {
        int64_t n = (int64_t)(header >> 1);
        int nbytes = (s->width + 7) / 8;
        uint64_t v = 0;
        if (p + nbytes > s->end)
            return E_RLE_SHORT;
        for (int i = 0; i < nbytes; i++)
            v |= (uint64_t)s->data[p + i] << (8 * i);
        p += nbytes;
        if (v >> s->width) {
            s->bad_value = v;
            return E_RLE_WIDE;
        }
        r->packed = 0;
        r->take = n < left ? n : left;
        r->value = (uint32_t)v;
        s->pos = p;
        s->done += r->take;
    }
    return E_OK;
}

/* Walks the whole stream only to validate it. */
static int
validate(Stream *s)
{
    Run r;
    while (s->done < s->count) {
        int rc = next_run(s, &r);
        if (rc)
            return rc;
    }
    return E_OK;
}

static void
set_error(int rc, const Stream *s)
{
    switch (rc) {
    case E_HEADER:
        PyErr_SetString(PyExc_ValueError, "run header runs past the data");
        break;
    case E_ENDED:
        PyErr_Format(PyExc_ValueError, "runs end after %lld of %lld values",
                     (long long)s->done, (long long)s->count);
        break;
    case E_PACKED:
        PyErr_SetString(PyExc_ValueError, "bit-packed run runs past the data");
        break;
    case E_RLE_SHORT:
        PyErr_SetString(PyExc_ValueError, "RLE run value runs past the data");
        break;
    case E_RLE_WIDE:
        PyErr_Format(PyExc_ValueError, "RLE value %llu wider than %d bits",
                     (unsigned long long)s->bad_value, s->width);
        break;
    case E_LIMIT:
        PyErr_Format(PyExc_ValueError, "value %llu not below %lld",
                     (unsigned long long)s->bad_value, (long long)s->limit);
        break;
    default:
        PyErr_NoMemory();
    }
}

/* ------------------------------------------------------------ unpacking */

/* 8-value groups of W bits (W bytes each, LSB first) to uint32: one 64-bit
 * read per value, so the source must stay readable for 8 bytes past its last
 * group (see safe_groups). One function per width: the shifts are constants. */
#define DEFINE_UNPACK(W)                                                       \
    static void unpack_##W(const uint8_t *src, int64_t groups, uint32_t *dst) \
    {                                                                          \
        const uint64_t mask = (UINT64_C(1) << W) - 1;                          \
        for (int64_t g = 0; g < groups; g++) {                                 \
            for (int i = 0; i < 8; i++)                                        \
                dst[i] = (uint32_t)((load_le64(src + ((i * W) >> 3))           \
                                     >> ((i * W) & 7)) & mask);                \
            src += W;                                                          \
            dst += 8;                                                          \
        }                                                                      \
    }

DEFINE_UNPACK(1) DEFINE_UNPACK(2) DEFINE_UNPACK(3) DEFINE_UNPACK(4)
DEFINE_UNPACK(5) DEFINE_UNPACK(6) DEFINE_UNPACK(7) DEFINE_UNPACK(8)
DEFINE_UNPACK(9) DEFINE_UNPACK(10) DEFINE_UNPACK(11) DEFINE_UNPACK(12)
DEFINE_UNPACK(13) DEFINE_UNPACK(14) DEFINE_UNPACK(15) DEFINE_UNPACK(16)
DEFINE_UNPACK(17) DEFINE_UNPACK(18) DEFINE_UNPACK(19) DEFINE_UNPACK(20)
DEFINE_UNPACK(21) DEFINE_UNPACK(22) DEFINE_UNPACK(23) DEFINE_UNPACK(24)
DEFINE_UNPACK(25) DEFINE_UNPACK(26) DEFINE_UNPACK(27) DEFINE_UNPACK(28)
DEFINE_UNPACK(29) DEFINE_UNPACK(30) DEFINE_UNPACK(31) DEFINE_UNPACK(32)

typedef void (*Unpack)(const uint8_t *, int64_t, uint32_t *);

static const Unpack UNPACK[33] = {
    NULL, unpack_1, unpack_2, unpack_3, unpack_4, unpack_5, unpack_6, unpack_7,
    unpack_8, unpack_9, unpack_10, unpack_11, unpack_12, unpack_13, unpack_14,
    unpack_15, unpack_16, unpack_17, unpack_18, unpack_19, unpack_20, unpack_21,
    unpack_22, unpack_23, unpack_24, unpack_25, unpack_26, unpack_27, unpack_28,
    unpack_29, unpack_30, unpack_31, unpack_32,
};

/* Groups of a bit-packed run at ``body`` that an 8-byte read past their end
 * keeps inside the buffer. */
static inline int64_t
safe_groups(const Stream *s, int64_t body, int64_t room_past)
{
    int64_t room = s->len - body;
    return room >= room_past ? (room - room_past) / s->width : 0;
}

/* The group at ``start`` copied with zeros after the stream's end (as the numpy
 * code pads it; those values are past ``count`` and never given out). */
static inline void
padded_group(const Stream *s, int64_t start, uint8_t tmp[48])
{
    int64_t avail = s->end - start;
    memset(tmp, 0, 48);
    if (avail > s->width)
        avail = s->width;
    if (avail > 0)
        memcpy(tmp, s->data + start, (size_t)avail);
}

#define CHUNK 1024 /* values unpacked at a time (a multiple of 8) */

/* Receives ``n`` unpacked values, the first being the run's value ``first``. */
typedef int (*Sink)(void *ctx, const uint32_t *vals, int64_t first, int64_t n);

static int
unpack_run(const Stream *s, const Run *r, Sink sink, void *ctx)
{
    uint32_t buf[CHUNK];
    const int w = s->width;
    int64_t groups = (r->take + 7) / 8;
    int64_t safe = safe_groups(s, r->body, 8);
    int64_t g = 0;

    while (g < groups) {
        int64_t k = groups - g, n;
        int rc;
        if (k > CHUNK / 8)
            k = CHUNK / 8;
        if (g < safe) {
            if (k > safe - g)
                k = safe - g;
            UNPACK[w](s->data + r->body + g * w, k, buf);
        }
        else {
            uint8_t tmp[48];
            padded_group(s, r->body + g * w, tmp);
            UNPACK[w](tmp, 1, buf);
            k = 1;
        }
        n = k * 8;
        if (g * 8 + n > r->take)
            n = r->take - g * 8;
        rc = sink(ctx, buf, g * 8, n);
        if (rc)
            return rc;
        g += k;
    }
    return E_OK;
}

/* ------------------------------------------------------------ positions */

/* A growable array of int64 positions (raw allocator: used without the GIL). */
typedef struct {
    int64_t *items;
    int64_t size, cap;
} Vec;

static int
vec_reserve(Vec *v, int64_t more)
{
    int64_t cap;
    int64_t *items;
    if (v->size + more <= v->cap)
        return E_OK;
    cap = v->cap ? v->cap : 64;
    while (cap < v->size + more) {
        if (cap > (INT64_MAX / 16))
            return E_NOMEM;
        cap *= 2;
    }
    if ((uint64_t)cap > (uint64_t)PY_SSIZE_T_MAX / sizeof(int64_t))
        return E_NOMEM;
    items = PyMem_RawRealloc(v->items, (size_t)cap * sizeof(int64_t));
    if (items == NULL)
        return E_NOMEM;
    v->items = items;
    v->cap = cap;
    return E_OK;
}

static inline int
vec_push(Vec *v, int64_t x)
{
    if (v->size == v->cap && vec_reserve(v, 1))
        return E_NOMEM;
    v->items[v->size++] = x;
    return E_OK;
}

/* What is wanted: values below ``size`` whose table byte is nonzero; ``strict``:
 * a value not below ``size`` is an error (a dictionary index past the end). */
typedef struct {
    const uint8_t *table;
    int64_t size;
    int strict;
    int nids;          /* wanted values (counted up to SWAR_IDS + 1) */
    uint32_t ids[16];  /* the first of them */
} Wanted;

/* At most this many wanted values are compared as 64-bit words (widths <= 8);
 * more are looked up in the table. */
#define SWAR_IDS 8

typedef struct {
    const Wanted *want;
    Vec *out;
    Stream *s;
    int64_t base; /* the run's first position in its stream */
} FindCtx;

static int
out_of_table(FindCtx *f, uint32_t v)
{
    f->s->bad_value = v;
    f->s->limit = f->want->size;
    return E_LIMIT;
}

static int
sink_table(void *ctx, const uint32_t *vals, int64_t first, int64_t n)
{
    FindCtx *f = ctx;
    const uint8_t *table = f->want->table;
    const uint64_t size = (uint64_t)f->want->size;
    int64_t at = f->base + first;
    for (int64_t i = 0; i < n; i++) {
        uint32_t v = vals[i];
        if (v >= size) {
            if (f->want->strict)
                return out_of_table(f, v);
        }
        else if (table[v] && vec_push(f->out, at + i)) {
            return E_NOMEM;
        }
    }
    return E_OK;
}

static int
sink_one(void *ctx, const uint32_t *vals, int64_t first, int64_t n)
{
    FindCtx *f = ctx;
    const uint32_t id = f->want->ids[0];
    int64_t at = f->base + first;
    uint32_t most = 0;
    for (int64_t i = 0; i < n; i++)
        if (vals[i] == id && vec_push(f->out, at + i))
            return E_NOMEM;
    if (f->want->strict) {
        for (int64_t i = 0; i < n; i++)
            most = vals[i] > most ? vals[i] : most;
        if (most >= (uint64_t)f->want->size)
            return out_of_table(f, most);
    }
    return E_OK;
}

/* A bit-packed run of width <= 8 searched a group (one 64-bit word) at a time:
 * after XOR with a wanted value repeated 8 times, a field is zero exactly where
 * the value matches; the zero fields are found with carries kept inside them. */
static int
swar_run(Stream *s, const Run *r, const Wanted *want, Vec *out, int64_t base)
{
    const int w = s->width;
    const uint64_t fields = w == 8 ? UINT64_MAX : (UINT64_C(1) << (8 * w)) - 1;
    uint64_t low = 0, top = 0, pattern[SWAR_IDS];
    /* The bound check: even fields, and odd ones shifted onto them, each get the
     * w free bits above it, where field + (2^w - size) carries iff field >= size. */
    uint64_t even = 0, carry = 0, add = 0;
    const int check = want->strict && want->size < (INT64_C(1) << w);
    int nids = 0;
    int64_t groups = (r->take + 7) / 8;
    int64_t safe = safe_groups(s, r->body, 8) + 1; /* one 8-byte read per group */
    const uint8_t *src = s->data + r->body;

    if (s->len - r->body < 8)
        safe = 0;
    for (int i = 0; i < 8; i++) {
        low |= ((UINT64_C(1) << (w - 1)) - 1) << (i * w);
        top |= UINT64_C(1) << (i * w + w - 1);
        if (i % 2 == 0 && check) {
            even |= ((UINT64_C(1) << w) - 1) << (i * w);
            carry |= UINT64_C(1) << (i * w + w);
            add |= ((UINT64_C(1) << w) - (uint64_t)want->size) << (i * w);
        }
    }
    /* Only values that fit the width can match (wider ones would spill into
     * the neighbouring fields). */
    for (int k = 0; k < want->nids; k++) {
        if (want->ids[k] >> w)
            continue;
        pattern[nids] = 0;
        for (int i = 0; i < 8; i++)
            pattern[nids] |= (uint64_t)want->ids[k] << (i * w);
        nids++;
    }
    if (nids == 0 && !check)
        return E_OK;
    for (int64_t g = 0; g < groups; g++) {
        uint64_t word, found = 0;
        if (g < safe) {
            word = load_le64(src + g * w);
        }
        else {
            uint8_t tmp[48];
            padded_group(s, r->body + g * w, tmp);
            word = load_le64(tmp);
        }
        word &= fields;
        if (g == groups - 1 && r->take % 8) /* padding fields: zero */
            word &= (UINT64_C(1) << ((r->take % 8) * w)) - 1;
        if (check && ((((word & even) + add) | (((word >> w) & even) + add)) & carry)) {
            for (int i = 0; i < 8; i++) {
                uint64_t v = (word >> (i * w)) & ((UINT64_C(1) << w) - 1);
                if (v >= (uint64_t)want->size && g * 8 + i < r->take) {
                    s->bad_value = v;
                    s->limit = want->size;
                    return E_LIMIT;
                }
            }
        }
        for (int k = 0; k < nids; k++) {
            uint64_t y = word ^ pattern[k];
            found |= ~(((y & low) + low) | y) & top;
        }
        while (found) {
            int64_t i = g * 8 + __builtin_ctzll(found) / w;
            if (i >= r->take)
                break; /* the padding of a last group */
            if (vec_push(out, base + i))
                return E_NOMEM;
            found &= found - 1;
        }
    }
    return E_OK;
}

/* Positions (appended to ``out``) of the stream's values that are wanted. */
static int
find_stream(Stream *s, const Wanted *want, Vec *out)
{
    Run r;
    FindCtx ctx = {want, out, s, 0};
    while (s->done < s->count) {
        int64_t base = s->done;
        int rc = next_run(s, &r);
        if (rc)
            return rc;
        if (r.take == 0)
            continue;
        if (!r.packed) {
            if (want->strict && r.value >= (uint64_t)want->size) {
                s->bad_value = r.value;
                s->limit = want->size;
                return E_LIMIT;
            }
            if (r.value < (uint64_t)want->size && want->table[r.value]) {
                if (vec_reserve(out, r.take))
                    return E_NOMEM;
                for (int64_t i = 0; i < r.take; i++)
                    out->items[out->size++] = base + i;
            }
            continue;
        }
        if (want->nids == 0 && !want->strict)
            continue;
        ctx.base = base;
        if (s->width <= 8 && want->nids <= SWAR_IDS)
            rc = swar_run(s, &r, want, out, base);
        else if (want->nids == 1)
            rc = unpack_run(s, &r, sink_one, &ctx);
        else
            rc = unpack_run(s, &r, sink_table, &ctx);
        if (rc)
            return rc;
    }
    return E_OK;
}

/* ------------------------------------------------------------ arguments */

static int
check_width(int width)
{
    if (width < 1 || width > 32) {
        PyErr_Format(PyExc_ValueError, "bit width %d", width);
        return -1;
    }
    return 0;
}

/* A stream over ``view``; a negative count means none. */
static int
stream_init(Stream *s, const Py_buffer *view, Py_ssize_t pos, Py_ssize_t end, int width,
            Py_ssize_t count)
{
    if (pos < 0 || end > view->len) {
        PyErr_Format(PyExc_ValueError, "stream [%zd, %zd) outside a buffer of %zd bytes",
                     pos, end, view->len);
        return -1;
    }
    s->data = view->buf;
    s->len = view->len;
    s->pos = pos;
    s->end = end;
    s->width = width;
    s->count = count > 0 ? count : 0;
    s->done = 0;
    s->bad_value = 0;
    s->limit = 0;
    return 0;
}

static int
wanted_init(Wanted *want, const Py_buffer *table, int strict)
{
    const uint8_t *t = table->buf;
    /* values are below 2^32: entries past that never match */
    int64_t size = (int64_t)table->len;
    if (size > (INT64_C(1) << 32))
        size = INT64_C(1) << 32;
    want->table = t;
    want->size = size;
    want->strict = strict;
    want->nids = 0;
    for (int64_t i = 0; i < size; i++) {
        if (!t[i]) {
            /* a dictionary's table is mostly zeros: skip them 8 at a time */
            while (i + 8 < size && load_le64(t + i + 1) == 0)
                i += 8;
            continue;
        }
        if (want->nids < 16)
            want->ids[want->nids] = (uint32_t)i;
        if (++want->nids > SWAR_IDS)
            break; /* past the word-compare limit: only the table is used */
    }
    return 0;
}

/* A sequence of streams, each a tuple (buffer, pos, end, count) of ``width``-bit
 * values, or (buffer, pos, end, width, count) when ``width`` is 0; their buffers
 * held until streams_release. */
typedef struct {
    PyObject *seq;
    Py_buffer *views;
    Stream *ss;
    Py_ssize_t n, held;
} Streams;

static void
streams_release(Streams *st)
{
    for (Py_ssize_t k = 0; k < st->held; k++)
        PyBuffer_Release(&st->views[k]);
    PyMem_Free(st->views);
    PyMem_Free(st->ss);
    Py_XDECREF(st->seq);
}

/* 0, or -1 with an exception set (what was held is released by streams_release). */
static int
streams_open(Streams *st, PyObject *streams, int width)
{
    memset(st, 0, sizeof *st);
    st->seq = PySequence_Fast(streams, "streams must be a sequence");
    if (st->seq == NULL)
        return -1;
    st->n = PySequence_Fast_GET_SIZE(st->seq);
    st->views = PyMem_Calloc((size_t)(st->n ? st->n : 1), sizeof(Py_buffer));
    st->ss = PyMem_Calloc((size_t)(st->n ? st->n : 1), sizeof(Stream));
    if (st->views == NULL || st->ss == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (; st->held < st->n; st->held++) {
        PyObject *item = PySequence_Fast_GET_ITEM(st->seq, st->held);
        PyObject *obj;
        Py_ssize_t pos, end, count;
        int w = width;
        if (!PyTuple_Check(item)) {
            PyErr_SetString(PyExc_TypeError,
                            width ? "a stream is a tuple (buffer, pos, end, count)"
                                  : "a stream is a tuple (buffer, pos, end, width, count)");
            return -1;
        }
        if (width ? !PyArg_ParseTuple(item, "Onnn:stream", &obj, &pos, &end, &count)
                  : !PyArg_ParseTuple(item, "Onnin:stream", &obj, &pos, &end, &w, &count))
            return -1;
        if (!width && check_width(w))
            return -1;
        if (PyObject_GetBuffer(obj, &st->views[st->held], PyBUF_SIMPLE) < 0)
            return -1;
        if (stream_init(&st->ss[st->held], &st->views[st->held], pos, end, w, count)) {
            PyBuffer_Release(&st->views[st->held]);
            return -1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------ functions */

PyDoc_STRVAR(find_many_doc,
"find_many(streams, width, table, strict=False) -> list[bytearray]\n\n"
"For each stream (buffer, pos, end, count) of ``width``-bit values, the\n"
"positions (native int64, ascending) of the values v < len(table) with\n"
"table[v] != 0. Raises ValueError for a malformed stream and, when\n"
"``strict``, for a value not below len(table).");

static PyObject *
find_many(PyObject *self, PyObject *args)
{
    PyObject *streams, *result = NULL;
    int width;
    Py_buffer table = {0};
    Streams st = {0};
    int64_t *ends = NULL;
    Wanted want;
    Vec out = {NULL, 0, 0};
    int rc = E_OK;
    Py_ssize_t failed = -1;

    int strict = 0;

    if (!PyArg_ParseTuple(args, "Oiy*|p:find_many", &streams, &width, &table, &strict))
        return NULL;
    if (check_width(width) || streams_open(&st, streams, width))
        goto done;
    ends = PyMem_Calloc((size_t)(st.n ? st.n : 1), sizeof(int64_t));
    if (ends == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    wanted_init(&want, &table, strict);
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < st.n; k++) {
        rc = find_stream(&st.ss[k], &want, &out);
        if (rc) {
            failed = k;
            break;
        }
        ends[k] = out.size;
    }
    Py_END_ALLOW_THREADS
    if (rc) {
        set_error(rc, &st.ss[failed]);
        goto done;
    }
    result = PyList_New(st.n);
    if (result == NULL)
        goto done;
    for (Py_ssize_t k = 0, start = 0; k < st.n; k++) {
        PyObject *b = PyByteArray_FromStringAndSize(
            (const char *)(out.items + start), (Py_ssize_t)((ends[k] - start) * 8));
        if (b == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, k, b);
        start = (Py_ssize_t)ends[k];
    }
done:
    streams_release(&st);
    PyMem_Free(ends);
    PyMem_RawFree(out.items);
    PyBuffer_Release(&table);
    return result;
}

typedef struct {
    uint8_t *out; /* the stream's values, itemsize bytes each */
    int itemsize;
    int64_t base;
} DecodeCtx;

static void
fill(DecodeCtx *d, int64_t at, uint32_t value, int64_t n)
{
    if (d->itemsize == 8) {
        int64_t *o = (int64_t *)d->out + at;
        for (int64_t i = 0; i < n; i++)
            o[i] = value;
    }
    else if (d->itemsize == 4) {
        uint32_t *o = (uint32_t *)d->out + at;
        for (int64_t i = 0; i < n; i++)
            o[i] = value;
    }
    else {
        memset(d->out + at, (int)value, (size_t)n);
    }
}

static int
sink_decode(void *ctx, const uint32_t *vals, int64_t first, int64_t n)
{
    DecodeCtx *d = ctx;
    int64_t at = d->base + first;
    if (d->itemsize == 8) {
        int64_t *o = (int64_t *)d->out + at;
        for (int64_t i = 0; i < n; i++)
            o[i] = vals[i];
    }
    else if (d->itemsize == 4) {
        memcpy((uint32_t *)d->out + at, vals, (size_t)n * 4);
    }
    else {
        uint8_t *o = d->out + at;
        for (int64_t i = 0; i < n; i++)
            o[i] = (uint8_t)vals[i];
    }
    return E_OK;
}

static int
decode_stream(Stream *s, DecodeCtx *d)
{
    Run r;
    while (s->done < s->count) {
        int64_t base = s->done;
        int rc = next_run(s, &r);
        if (rc)
            return rc;
        if (!r.packed) {
            fill(d, base, r.value, r.take);
            continue;
        }
        d->base = base;
        rc = unpack_run(s, &r, sink_decode, d);
        if (rc)
            return rc;
    }
    return E_OK;
}

PyDoc_STRVAR(decode_doc,
"decode(buffer, pos, end, width, count, itemsize=8) -> bytearray\n\n"
"The ``count`` values of the stream, as native unsigned integers of\n"
"``itemsize`` bytes (1, 4 or 8; 1 only for widths <= 8). The stream is\n"
"validated before the output is allocated. Raises ValueError like\n"
"hybrid.decode_hybrid.");

static PyObject *
decode(PyObject *self, PyObject *args)
{
    Py_buffer view = {0};
    Py_ssize_t pos, end, count;
    int width, itemsize = 8, rc;
    Stream s, again;
    DecodeCtx d;
    PyObject *result = NULL;

    if (!PyArg_ParseTuple(args, "y*nnin|i:decode", &view, &pos, &end, &width, &count, &itemsize))
        return NULL;
    if (check_width(width))
        goto done;
    if (!(itemsize == 8 || itemsize == 4 || (itemsize == 1 && width <= 8))) {
        PyErr_Format(PyExc_ValueError, "item size %d for width %d", itemsize, width);
        goto done;
    }
    if (stream_init(&s, &view, pos, end, width, count))
        goto done;
    again = s;
    Py_BEGIN_ALLOW_THREADS
    rc = validate(&s);
    Py_END_ALLOW_THREADS
    if (rc) {
        set_error(rc, &s);
        goto done;
    }
    if (again.count > PY_SSIZE_T_MAX / itemsize) {
        PyErr_NoMemory();
        goto done;
    }
    result = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)again.count * itemsize);
    if (result == NULL)
        goto done;
    d.out = (uint8_t *)PyByteArray_AS_STRING(result);
    d.itemsize = itemsize;
    d.base = 0;
    Py_BEGIN_ALLOW_THREADS
    rc = decode_stream(&again, &d);
    Py_END_ALLOW_THREADS
    if (rc) { /* cannot happen: validated above */
        set_error(rc, &again);
        Py_CLEAR(result);
    }
done:
    PyBuffer_Release(&view);
    return result;
}

/* Item ``j`` of native int64s at ``p`` (any alignment: a buffer may be a slice). */
static inline int64_t
get64(const uint8_t *p, Py_ssize_t j)
{
    int64_t v;
    memcpy(&v, p + j * 8, 8);
    return v;
}

/* One value of a bit-packed run, index ``i`` of it. */
static inline uint32_t
packed_value(const Stream *s, const Run *r, int64_t i)
{
    const int w = s->width;
    int64_t bit = i * w;
    int64_t at = r->body + (bit >> 3);
    uint8_t tmp[8] = {0};
    int64_t avail = s->end - at;
    if (avail > 8)
        avail = 8;
    if (avail > 0)
        memcpy(tmp, s->data + at, (size_t)avail);
    return (uint32_t)((load_le64(tmp) >> (bit & 7)) & ((UINT64_C(1) << w) - 1));
}

PyDoc_STRVAR(decode_at_doc,
"decode_at(buffer, pos, end, width, count, at) -> bytearray\n\n"
"The values (native int64) at positions ``at`` (native int64, ascending,\n"
"each < count) of the stream, unpacking only those. The whole stream is\n"
"validated. Raises ValueError like hybrid.decode_hybrid_at.");

static PyObject *
decode_at(PyObject *self, PyObject *args)
{
    Py_buffer view = {0}, atv = {0};
    Py_ssize_t pos, end, count, nat;
    int width, rc = E_OK;
    Stream s;
    const uint8_t *at;
    uint8_t *vals;
    PyObject *result = NULL;

    if (!PyArg_ParseTuple(args, "y*nniny*:decode_at", &view, &pos, &end, &width, &count, &atv))
        return NULL;
    if (check_width(width) || stream_init(&s, &view, pos, end, width, count))
        goto done;
    if (atv.len % 8) {
        PyErr_SetString(PyExc_ValueError, "positions must be int64");
        goto done;
    }
    nat = atv.len / 8;
    at = atv.buf;
    for (Py_ssize_t j = 0, prev = 0; j < nat; j++) {
        int64_t a = get64(at, j);
        if (a < 0 || a >= s.count || a < prev) {
            PyErr_SetString(PyExc_ValueError,
                            "positions must be ascending and below the value count");
            goto done;
        }
        prev = a;
    }
    result = PyByteArray_FromStringAndSize(NULL, nat * 8);
    if (result == NULL)
        goto done;
    vals = (uint8_t *)PyByteArray_AS_STRING(result);
    Py_BEGIN_ALLOW_THREADS
    {
        Run r;
        Py_ssize_t j = 0;
        while (s.done < s.count) {
            int64_t base = s.done;
            rc = next_run(&s, &r);
            if (rc)
                break;
            for (; j < nat && get64(at, j) < base + r.take; j++) {
                int64_t v = r.packed ? packed_value(&s, &r, get64(at, j) - base) : r.value;
                memcpy(vals + j * 8, &v, 8);
            }
        }
    }
    Py_END_ALLOW_THREADS
    if (rc) {
        set_error(rc, &s);
        Py_CLEAR(result);
    }
done:
    PyBuffer_Release(&view);
    PyBuffer_Release(&atv);
    return result;
}

/* ------------------------------------------------------------ dictionary sums */

#ifdef __SIZEOF_INT128__
#define HAVE_DICT_SUM 1

/* The sum of dictionary entries the indices of a stream name. Floats: per chunk of
 * unpacked values a 4-lane sum, chunks added with Neumaier's compensation (error
 * near a pairwise sum's); ``raw`` is the plain running sum, kept for NaN and
 * infinities (the compensation turns inf - inf into NaN where IEEE order would too,
 * but also inf alone into NaN). Integers: exact, in 128 bits. */
typedef struct {
    const uint8_t *dict;
    int64_t size;
    char kind; /* 'd' 'f' 'q' 'i' 'Q' 'I': numpy's type characters */
    double hi, lo, raw;
    __int128 total;
    uint32_t bad; /* E_LIMIT: the first value past the dictionary */
} SumCtx;

static inline void
sum_add(SumCtx *c, double x)
{
    double t = c->hi + x;
    if (fabs(c->hi) >= fabs(x))
        c->lo += (c->hi - t) + x;
    else
        c->lo += (x - t) + c->hi;
    c->hi = t;
    c->raw += x;
}

static inline double
fentry(const SumCtx *c, uint32_t k)
{
    if (c->kind == 'd') {
        double v;
        memcpy(&v, c->dict + (size_t)k * 8, 8);
        return v;
    }
    float f;
    memcpy(&f, c->dict + (size_t)k * 4, 4);
    return (double)f;
}

static inline __int128
ientry(const SumCtx *c, uint32_t k)
{
    switch (c->kind) {
    case 'q': { int64_t v; memcpy(&v, c->dict + (size_t)k * 8, 8); return v; }
    case 'Q': { uint64_t v; memcpy(&v, c->dict + (size_t)k * 8, 8); return v; }
    case 'i': { int32_t v; memcpy(&v, c->dict + (size_t)k * 4, 4); return v; }
    default: { uint32_t v; memcpy(&v, c->dict + (size_t)k * 4, 4); return v; }
    }
}

static int
sink_sum(void *ctx, const uint32_t *vals, int64_t first, int64_t n)
{
    SumCtx *c = ctx;
    /* Every value checked in the same pass: one past the end reads entry 0 instead
     * and fails the call once the chunk is done. */
    const uint32_t size = c->size > UINT32_MAX ? UINT32_MAX : (uint32_t)c->size;
    uint32_t over = 0;
    (void)first;
    if (n && !size)
        return E_LIMIT;
    if (c->kind == 'd') {
        double lane[4] = {0, 0, 0, 0};
        int64_t i = 0;
        for (; i + 4 <= n; i += 4)
            for (int j = 0; j < 4; j++) {
                uint32_t k = vals[i + j];
                double v;
                over |= k >= size;
                memcpy(&v, c->dict + (size_t)(k < size ? k : 0) * 8, 8);
                lane[j] += v;
            }
        for (; i < n; i++) {
            uint32_t k = vals[i];
            over |= k >= size;
            lane[i & 3] += fentry(c, k < size ? k : 0);
        }
        sum_add(c, (lane[0] + lane[1]) + (lane[2] + lane[3]));
    }
    else if (c->kind == 'f') {
        double lane = 0;
        for (int64_t i = 0; i < n; i++) {
            uint32_t k = vals[i];
            over |= k >= size;
            lane += fentry(c, k < size ? k : 0);
        }
        sum_add(c, lane);
    }
    else {
        for (int64_t i = 0; i < n; i++) {
            uint32_t k = vals[i];
            over |= k >= size;
            c->total += ientry(c, k < size ? k : 0);
        }
    }
    if (over) {
        for (int64_t i = 0; i < n; i++)
            if (vals[i] >= size) {
                c->bad = vals[i];
                break;
            }
        return E_LIMIT;
    }
    return E_OK;
}

static int
sum_stream(Stream *s, SumCtx *c)
{
    Run r;
    while (s->done < s->count) {
        int rc = next_run(s, &r);
        if (rc)
            return rc;
        if (!r.packed) {
            if ((int64_t)r.value >= c->size) {
                s->bad_value = r.value;
                return E_LIMIT;
            }
            if (c->kind == 'd' || c->kind == 'f')
                sum_add(c, fentry(c, r.value) * (double)r.take);
            else
                c->total += ientry(c, r.value) * (__int128)r.take;
            continue;
        }
        rc = unpack_run(s, &r, sink_sum, c);
        if (rc == E_LIMIT)
            s->bad_value = c->bad;
        if (rc)
            return rc;
    }
    return E_OK;
}

static PyObject *
int128_to_py(__int128 v)
{
    PyObject *hi = PyLong_FromLongLong((long long)(v >> 64));
    PyObject *lo = PyLong_FromUnsignedLongLong((unsigned long long)(uint64_t)v);
    PyObject *shift = PyLong_FromLong(64), *up = NULL, *out = NULL;
    if (hi && lo && shift && (up = PyNumber_Lshift(hi, shift)) != NULL)
        out = PyNumber_Add(up, lo);
    Py_XDECREF(hi);
    Py_XDECREF(lo);
    Py_XDECREF(shift);
    Py_XDECREF(up);
    return out;
}

PyDoc_STRVAR(dict_sum_doc,
"dict_sum(streams, dictionary, kind) -> int | float\n\n"
"The sum of dictionary[v] over the values v of every stream (buffer, pos,\n"
"end, width, count), the GIL released once for all of them.\n"
"``dictionary``: native values of numpy type character ``kind`` ('d', 'f':\n"
"a float, summed in double precision; 'q', 'i', 'Q', 'I': an exact int).\n"
"Raises ValueError like hybrid.decode_hybrid, and for a value not below\n"
"the dictionary's size.");

static PyObject *
dict_sum(PyObject *self, PyObject *args)
{
    PyObject *streams, *result = NULL;
    Py_buffer dict = {0};
    Streams st = {0};
    Py_ssize_t failed = -1;
    int rc = E_OK, item, kind; /* "C" gives an int */
    SumCtx c;

    if (!PyArg_ParseTuple(args, "Oy*C:dict_sum", &streams, &dict, &kind))
        return NULL;
    item = (kind == 'd' || kind == 'q' || kind == 'Q') ? 8
           : (kind == 'f' || kind == 'i' || kind == 'I') ? 4 : 0;
    if (!item) {
        PyErr_Format(PyExc_ValueError, "dictionary kind %c", kind);
        goto done;
    }
    if (streams_open(&st, streams, 0))
        goto done;
    memset(&c, 0, sizeof c);
    c.dict = dict.buf;
    c.size = (int64_t)(dict.len / item);
    c.kind = (char)kind;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < st.n && !rc; i++) {
        rc = sum_stream(&st.ss[i], &c);
        if (rc)
            failed = i;
    }
    Py_END_ALLOW_THREADS
    if (rc) {
        st.ss[failed].limit = c.size;
        set_error(rc, &st.ss[failed]);
        goto done;
    }
    if (kind == 'd' || kind == 'f')
        result = PyFloat_FromDouble(isfinite(c.raw) ? c.hi + c.lo : c.raw);
    else
        result = int128_to_py(c.total);
done:
    streams_release(&st);
    PyBuffer_Release(&dict);
    return result;
}
#endif

static PyMethodDef methods[] = {
    {"find_many", find_many, METH_VARARGS, find_many_doc},
    {"decode", decode, METH_VARARGS, decode_doc},
    {"decode_at", decode_at, METH_VARARGS, decode_at_doc},
#ifdef HAVE_DICT_SUM
    {"dict_sum", dict_sum, METH_VARARGS, dict_sum_doc},
#endif
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "pqindex.scan._hybrid",
    "C kernel for the RLE / bit-packed hybrid encoding (see hybrid.py).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__hybrid(void)
{
    return PyModule_Create(&module);
}
