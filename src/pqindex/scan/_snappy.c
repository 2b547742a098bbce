/* Optional C helper for scan/decompress.py (gather): a few fixed-width values taken
 * out of a raw snappy block without decompressing all of it.
 *
 * A raw snappy block is a varint (the uncompressed length) and then elements,
 * each a literal (bytes stored) or a copy (length, offset back into the
 * output). To know the byte at output position X every element before X must
 * be parsed, but not every byte must be written: a literal that ends before
 * the bytes wanted is skipped by its length. Every known compressor (snappy's
 * own, snap, Go's) compresses its input in 64 KiB fragments, each on its own,
 * so a copy never reaches back past the start of the 64 KiB fragment it
 * writes into; this module writes only the fragments holding wanted bytes
 * (from the fragment start) and gives up (None) if a copy reaches outside what
 * it wrote. It also gives up on anything malformed: the caller then
 * decompresses the block whole, and that decoder reports the error.
 * Skipping to a window passes runs of a repeated pair of elements by their
 * stride (skip_to): sorted integers and timestamps compress to such runs.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FRAGMENT ((int64_t)1 << 16)
/* Elements measured one by one between two looks for a repeated pair. */
#define PROBE_EVERY 16
/* Spare bytes after the last window: fixed-size copies may write past a value. */
#define SLACK 64

typedef struct {
    int64_t start, end; /* output bytes [start, end) written */
} window;

/* The uncompressed length stated in front of the block; -1 when malformed. */
static int64_t
stated_length(const uint8_t *p, int64_t n, int64_t *pos)
{
    uint64_t v = 0;
    int shift = 0;
    int64_t i = 0;
    while (i < n && i < 5) {
        uint8_t b = p[i++];
        v |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) {
            *pos = i;
            return v > 0xFFFFFFFFu ? -1 : (int64_t)v;
        }
        shift += 7;
    }
    return -1;
}

/* Per copy tag (tag & 3 != 0): its output length and the bytes of its offset. */
static uint8_t tag_length[256], copy_extra[256];

static void
init_tables(void)
{
    for (int t = 0; t < 256; t++) {
        switch (t & 3) {
        case 1: tag_length[t] = (uint8_t)(4 + ((t >> 2) & 7)); copy_extra[t] = 1; break;
        case 2: tag_length[t] = (uint8_t)((t >> 2) + 1); copy_extra[t] = 2; break;
        case 3: tag_length[t] = (uint8_t)((t >> 2) + 1); copy_extra[t] = 4; break;
        default: break;
        }
    }
}

/* A literal's length and where its bytes start, from its tag at src[ip];
 * -1 when it runs past the block. */
static int64_t
literal(const uint8_t *src, int64_t n, int64_t ip, int64_t *data)
{
    int64_t len = src[ip] >> 2;
    ip += 1;
    if (len >= 60) {
        int k = (int)len - 59;
        if (ip + k > n)
            return -1;
        len = 0;
        for (int j = 0; j < k; j++)
            len |= (int64_t)src[ip + j] << (8 * j);
        ip += k;
    }
    len += 1;
    if (len > n - ip)
        return -1;
    *data = ip;
    return len;
}

/* One element at *ip measured (not written) if it ends by ws: 1 when it was, *ip
 * and *op past it and *tag its tag (256 for a long literal, whose tag does not
 * give its length); 0 when it reaches into the window or past the block (the
 * writer handles it); -1 when malformed. Skipping is a chain of dependent loads
 * (tag, then the next tag): lengths by arithmetic, not a table, keep one load
 * off it (~10% faster). */
static inline int
measure(const uint8_t *src, int64_t n, int64_t ws, int64_t *ip, int64_t *op,
        uint32_t *tag_out)
{
    if (*ip >= n) /* at the block's end: fine only when ws is reached */
        return *op >= ws ? 0 : -1;
    uint32_t tag = src[*ip], e = tag & 3;
    int64_t len = e == 1 ? 4 + ((tag >> 2) & 7) : (tag >> 2) + 1;
    int64_t next = *ip + (e ? 1 + e + ((e >> 1) & e) : 1 + len);
    if (tag >= 240 && !e) {
        int64_t data;
        len = literal(src, n, *ip, &data);
        if (len < 0)
            return -1;
        next = data + len;
        tag = 256;
    }
    if (*op + len > ws || next > n)
        return 0;
    *op += len;
    *ip = next;
    *tag_out = tag;
    return 1;
}

/* Elements passed by their tags alone while far from the window and the block's
 * end (at most max): with 64 bytes of output and 6 of input to spare, no bound is
 * checked per element. It branches on the tag's kind where measure computes: the
 * CPU predicts the branch and runs ahead of the tag's load, so a regular run of
 * elements (a 1-byte literal, then a copy) no longer waits on every load (1.2x
 * on the issue file's dictionaries of doubles and timestamps). Stops before a
 * long literal, which measure handles; returns the elements passed. */
static inline int
pass_fast(const uint8_t *src, int64_t n, int64_t ws, int64_t *ip_io, int64_t *op_io, int max)
{
    int64_t ip = *ip_io, op = *op_io;
    const int64_t ip_end = n - 6, op_end = ws - 64;
    int k = 0;
    for (; k < max && ip < ip_end && op < op_end; k++) {
        uint32_t tag = src[ip];
        switch (tag & 3) {
        case 0:
            if (tag >= 240)
                goto out;
            op += (tag >> 2) + 1;
            ip += (tag >> 2) + 2;
            break;
        case 1:
            op += 4 + ((tag >> 2) & 7);
            ip += 2;
            break;
        case 2:
            op += (tag >> 2) + 1;
            ip += 3;
            break;
        default:
            op += (tag >> 2) + 1;
            ip += 5;
            break;
        }
    }
out:
    *ip_io = ip;
    *op_io = op;
    return k;
}

/* Elements measured from *ip / *op up to output ws (see measure). Compressible
 * runs repeat one pair of elements (sorted int64: a 1-byte literal and a 7-byte
 * copy per value): every few elements two pairs are compared, and while the
 * next pair has the same two tags, whose lengths the tags fix, it is passed by
 * its stride without the dependent loads (7x faster on such a dictionary
 * page; random values, which never repeat, pay the comparison only). */
static int
skip_to(const uint8_t *src, int64_t n, int64_t ws, int64_t *ip_io, int64_t *op_io)
{
    int64_t ip = *ip_io, op = *op_io; /* locals: kept in registers */
    uint32_t t[4];
    int r = 0;
    while (op < ws) {
        /* A literal may end past the block: ip > n, which measure reports. */
        for (int k = pass_fast(src, n, ws, &ip, &op, PROBE_EVERY); k < PROBE_EVERY; k++)
            if ((r = measure(src, n, ws, &ip, &op, &t[0])) != 1)
                goto done;
        int64_t p0 = ip, o0 = op, p1 = 0, p2 = 0, o2 = 0;
        for (int k = 0; k < 4; k++) {
            if ((r = measure(src, n, ws, &ip, &op, &t[k])) != 1)
                goto done;
            if (k == 0)
                p1 = ip;
            else if (k == 1) {
                p2 = ip;
                o2 = op;
            }
        }
        if (t[0] == t[2] && t[1] == t[3] && t[0] < 256 && t[1] < 256) {
            int64_t a = p2 - p0, o = o2 - o0, d = p1 - p0;
            uint8_t t0 = (uint8_t)t[0], t1 = (uint8_t)t[1];
            while (op + o <= ws && ip + a <= n && src[ip] == t0 && src[ip + d] == t1) {
                ip += a;
                op += o;
            }
        }
    }
done:
    *ip_io = ip;
    *op_io = op;
    return r < 0 ? -1 : 0;
}

/* Writes the windows' bytes of the block into out (size bytes). 0 when done,
 * -1 when the block is malformed or a copy needs bytes no window holds.
 * Elements wholly before a window are only measured, not checked further: the
 * values returned never depend on them. */
static int
fill_windows(const uint8_t *src, int64_t n, int64_t ip, int64_t size,
             const window *win, int64_t nwin, uint8_t *out)
{
    int64_t op = 0;
    for (int64_t w = 0; w < nwin; w++) {
        int64_t ws = win[w].start;
        if (skip_to(src, n, ws, &ip, &op) < 0)
            return -1;
        int64_t k0 = w;
        while (op < win[w].end) { /* write */
            if (ip >= n)
                return -1;
            uint8_t tag = src[ip];
            int64_t len, offset = 0, data = 0;
            int is_literal = !(tag & 3);
            if (is_literal) {
                len = literal(src, n, ip, &data);
                if (len < 0)
                    return -1;
                ip = data + len;
            } else {
                int extra = copy_extra[tag];
                if (ip + 1 + extra > n)
                    return -1;
                len = tag_length[tag];
                const uint8_t *p = src + ip + 1;
                if (extra == 1)
                    offset = ((int64_t)(tag >> 5) << 8) | p[0];
                else if (extra == 2)
                    offset = (int64_t)p[0] | ((int64_t)p[1] << 8);
                else
                    offset = (int64_t)p[0] | ((int64_t)p[1] << 8) |
                             ((int64_t)p[2] << 16) | ((int64_t)p[3] << 24);
                ip += 1 + extra;
                if (offset == 0 || offset > op)
                    return -1;
            }
            if (len > size - op)
                return -1;
            int64_t d0 = op, d1 = op + len;
            if (d0 >= ws && d1 <= win[w].end) {
                /* Inside the window: copies of fixed size where they fit, which may
                 * write up to 15 bytes past d1 (out has SLACK spare bytes; the
                 * elements after overwrite them before any copy reads them): 40%
                 * less time than copies clipped to the element's length. */
                if (is_literal) {
                    if (len <= 16 && data + 16 <= n)
                        memcpy(out + d0, src + data, 16);
                    else
                        memcpy(out + d0, src + data, (size_t)len);
                } else if (d0 - offset < ws) {
                    return -1; /* reaches bytes this module did not write */
                } else if (offset >= 16 && len <= 16) {
                    memcpy(out + d0, out + d0 - offset, 16);
                } else if (offset >= 8) {
                    for (int64_t x = d0; x < d1; x += 8)
                        memcpy(out + x, out + x - offset, 8);
                } else {
                    for (int64_t x = d0; x < d1; x++)
                        out[x] = out[x - offset];
                }
                op = d1;
                continue;
            }
            while (k0 < nwin && win[k0].end <= d0)
                k0++;
            for (int64_t k = k0; k < nwin && win[k].start < d1; k++) {
                int64_t a = d0 > win[k].start ? d0 : win[k].start;
                int64_t b = d1 < win[k].end ? d1 : win[k].end;
                if (a >= b)
                    continue;
                if (is_literal) {
                    memcpy(out + a, src + data + (a - d0), (size_t)(b - a));
                } else if (a - offset < win[k].start) {
                    return -1; /* reaches bytes this module did not write */
                } else if (offset >= b - a) {
                    memcpy(out + a, out + a - offset, (size_t)(b - a));
                } else {
                    for (int64_t x = a; x < b; x++)
                        out[x] = out[x - offset];
                }
            }
            op = d1;
        }
    }
    return 0;
}

static PyObject *
gather(PyObject *Py_UNUSED(self), PyObject *args)
{
    Py_buffer src, offs;
    Py_ssize_t size, width;
    if (!PyArg_ParseTuple(args, "y*ny*n", &src, &size, &offs, &width))
        return NULL;
    PyObject *result = NULL;
    window *win = NULL;
    uint8_t *out = NULL;
    int64_t count = offs.len / (Py_ssize_t)sizeof(int64_t);
    const int64_t *at = (const int64_t *)offs.buf;
    int64_t ip = 0;
    if (width <= 0 || count <= 0 || offs.len % (Py_ssize_t)sizeof(int64_t) ||
        stated_length(src.buf, src.len, &ip) != size) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    /* Windows: from the start of each wanted value's fragment to its end. */
    win = malloc((size_t)count * sizeof(window));
    if (!win) {
        PyErr_NoMemory();
        goto done;
    }
    int64_t nwin = 0;
    for (int64_t i = 0; i < count; i++) {
        int64_t a = at[i];
        if (a < 0 || a > size - width || (i && a < at[i - 1])) {
            result = Py_None;
            Py_INCREF(result);
            goto done;
        }
        int64_t s = a - a % FRAGMENT, e = a + width;
        if (nwin && s <= win[nwin - 1].end) {
            if (e > win[nwin - 1].end)
                win[nwin - 1].end = e;
        } else {
            win[nwin].start = s;
            win[nwin].end = e;
            nwin++;
        }
    }
    out = malloc((size_t)win[nwin - 1].end + SLACK);
    if (!out) {
        PyErr_NoMemory();
        goto done;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = fill_windows(src.buf, src.len, ip, size, win, nwin, out);
    Py_END_ALLOW_THREADS
    if (rc) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(count * width));
    if (result) {
        char *dst = PyBytes_AS_STRING(result);
        for (int64_t i = 0; i < count; i++)
            memcpy(dst + i * width, out + at[i], (size_t)width);
    }
done:
    free(win);
    free(out);
    PyBuffer_Release(&src);
    PyBuffer_Release(&offs);
    return result;
}

/* ------------------------------------------------------------ whole blocks */

/* The elements of a raw snappy block, src[ip:n], decompressed into out[0:size]; the
 * bytes written, or -1 when malformed. Every read and write is checked against the
 * buffers' ends; where both have room, short literals and copies move whole 16- or
 * 8-byte words (the bytes past the element are rewritten by the elements after it).
 * As fast as cramjam's decoder (Rust's snap) per byte: what it saves is the calls. */
static int64_t
decompress_block(const uint8_t *src, int64_t n, int64_t ip, uint8_t *out, int64_t size)
{
    static const uint32_t mask[4] = {0, 0xFF, 0xFFFF, 0xFFFFFFFF};
    int64_t op = 0;
    while (ip < n) {
        uint32_t tag = src[ip];
        int64_t len, offset;
        if ((tag & 3) && n - ip >= 5 && size - op >= 64) {
            /* A copy with room on both sides: its offset read as one word, masked;
             * each word copied reads bytes at least 8 (16) back, written already. */
            uint32_t e = tag & 3;
            uint32_t w;
            memcpy(&w, src + ip + 1, 4);
            offset = (int64_t)(w & mask[e]) + (e == 1 ? (int64_t)(tag >> 5) << 8 : 0);
            len = tag_length[tag];
            if (offset >= 8 && offset <= op) {
                uint8_t *d = out + op;
                const uint8_t *from = d - offset;
                if (offset >= 16) {
                    for (int64_t i = 0; i < len; i += 16)
                        memcpy(d + i, from + i, 16);
                }
                else {
                    for (int64_t i = 0; i < len; i += 8)
                        memcpy(d + i, from + i, 8);
                }
                ip += 1 + copy_extra[tag];
                op += len;
                continue;
            }
        }
        if (!(tag & 3)) {
            len = (tag >> 2) + 1;
            if (len <= 16 && n - ip >= 17 && size - op >= 16) {
                memcpy(out + op, src + ip + 1, 16);
                ip += 1 + len;
                op += len;
                continue;
            }
            int64_t data;
            len = literal(src, n, ip, &data);
            if (len < 0 || len > size - op)
                return -1;
            memcpy(out + op, src + data, (size_t)len);
            ip = data + len;
            op += len;
            continue;
        }
        int extra = copy_extra[tag];
        if (n - ip < 1 + extra)
            return -1;
        const uint8_t *p = src + ip + 1;
        len = tag_length[tag];
        if (extra == 1)
            offset = ((int64_t)(tag >> 5) << 8) | p[0];
        else if (extra == 2)
            offset = (int64_t)p[0] | ((int64_t)p[1] << 8);
        else
            offset = (int64_t)p[0] | ((int64_t)p[1] << 8) | ((int64_t)p[2] << 16) |
                     ((int64_t)p[3] << 24);
        ip += 1 + extra;
        if (offset == 0 || offset > op || len > size - op)
            return -1;
        /* Near either buffer's end, or a period under 8 bytes. */
        uint8_t *d = out + op;
        const uint8_t *from = d - offset;
        if (offset >= 8 && size - op >= len + 8) {
            for (int64_t i = 0; i < len; i += 8)
                memcpy(d + i, from + i, 8);
        }
        else if (size - op >= len + 16) {
            /* A short period (runs of a byte or a few): its first whole multiple of at
             * least 8 bytes written one by one, then 8-byte words from that far back. */
            int64_t period = offset * ((8 + offset - 1) / offset), i = 0;
            for (; i < period; i++)
                d[i] = from[i % offset];
            for (; i < len; i += 8)
                memcpy(d + i, d + i - period, 8);
        }
        else {
            for (int64_t i = 0; i < len; i++)
                d[i] = from[i];
        }
        op += len;
    }
    return op;
}

static PyObject *
decompress_many(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *parts, *seq = NULL, *result = NULL;
    Py_buffer out = {0};
    Py_buffer *views = NULL;
    int64_t *sizes = NULL, *got = NULL;
    Py_ssize_t n = 0, held = 0, total = 0;

    if (!PyArg_ParseTuple(args, "Ow*:decompress_many", &parts, &out))
        return NULL;
    seq = PySequence_Fast(parts, "parts must be a sequence");
    if (seq == NULL)
        goto done;
    n = PySequence_Fast_GET_SIZE(seq);
    views = PyMem_Calloc((size_t)(n ? n : 1), sizeof(Py_buffer));
    sizes = PyMem_Calloc((size_t)(n ? n : 1), sizeof(int64_t));
    got = PyMem_Calloc((size_t)(n ? n : 1), sizeof(int64_t));
    if (!views || !sizes || !got) {
        PyErr_NoMemory();
        goto done;
    }
    for (; held < n; held++) {
        Py_ssize_t size;
        PyObject *item = PySequence_Fast_GET_ITEM(seq, held);
        if (!PyArg_ParseTuple(item, "y*n:decompress_many part", &views[held], &size))
            goto done;
        if (size < 0 || size > out.len - total) {
            PyBuffer_Release(&views[held]);
            PyErr_SetString(PyExc_ValueError, "the parts' sizes exceed the output");
            goto done;
        }
        sizes[held] = size;
        total += size;
    }
    Py_BEGIN_ALLOW_THREADS
    {
        int64_t at = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            int64_t ip = 0;
            const uint8_t *src = views[i].buf;
            got[i] = -1;
            if (stated_length(src, views[i].len, &ip) == sizes[i])
                got[i] = decompress_block(src, views[i].len, ip, (uint8_t *)out.buf + at,
                                          sizes[i]);
            at += sizes[i];
        }
    }
    Py_END_ALLOW_THREADS
    result = PyList_New(n);
    if (result == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *ok = got[i] == sizes[i] ? Py_True : Py_False;
        Py_INCREF(ok);
        PyList_SET_ITEM(result, i, ok);
    }
done:
    for (Py_ssize_t i = 0; i < held; i++)
        PyBuffer_Release(&views[i]);
    PyMem_Free(views);
    PyMem_Free(sizes);
    PyMem_Free(got);
    Py_XDECREF(seq);
    PyBuffer_Release(&out);
    return result;
}

static PyMethodDef methods[] = {
    {"gather", gather, METH_VARARGS,
     "gather(block, size, offsets, width) -> bytes | None: the width-byte values "
     "at the int64 offsets (ascending) of a raw snappy block that decompresses "
     "to size bytes, writing only their 64 KiB fragments; None when that is not "
     "possible or the block is malformed."},
    {"decompress_many", decompress_many, METH_VARARGS,
     "decompress_many(parts, out) -> list[bool]: each (raw snappy block, size) of parts "
     "decompressed into out, one after another, with the GIL released once; per part, "
     "whether it decompressed to exactly its size (False: malformed, the bytes "
     "undefined)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "pqindex.scan._snappy",
    "Fixed-width values gathered from a raw snappy block.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__snappy(void)
{
    init_tables();
    return PyModule_Create(&module);
}
