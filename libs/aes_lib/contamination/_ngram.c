/* The contamination check's hot loops in C: ASCII tokenization, word -> id lookup, n-gram
 * window hashing and index probing, each over a whole text (or index) in one call.
 *
 * Tokens are token_bytes()' ASCII path: maximal runs of [A-Za-z0-9_], lower-cased. Window
 * hashes equal index.py's _window_hashes(): sum_k mixed[id(j+k)] * base^-k mod 2^64, kept
 * rolling here. index.py runs the exact (pure Python) verification on every hit, so this code
 * only has to never miss a held-out window; a hash collision costs time, never a report.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* Byte -> its lower-cased word byte, or 0 for a separator (token_bytes()' _ASCII_TABLE). */
static uint8_t WORD[256];

/* ---- words: a growable set of byte strings, each with a dense id ---------------------- */

typedef struct {
    uint64_t head; /* the word's first 8 bytes, zero-padded: equal words are decided here (most are short) */
    uint32_t len;
    uint32_t id1;  /* word id + 1; 0 marks an empty slot */
} Slot;

typedef struct {
    char *bytes;    /* every word, back to back */
    size_t *ends;   /* word i is bytes[ends[i] - len_i : ends[i]], starting where word i-1 ends */
    uint32_t count;
    size_t nbytes, cap_bytes, cap_words;
    Slot *slots;    /* open addressing, linear probing, at most half full */
    size_t mask;
} Words;

/* The word's first 8 bytes as one integer (byte j at bits 8j..8j+7), zero-padded. */
static uint64_t head_of(const uint8_t *p, size_t len) {
    uint64_t c = 0;
    for (size_t j = 0; j < len && j < 8; j++) c |= (uint64_t)p[j] << (8 * j);
    return c;
}

/* A word's hash takes its bytes 8 at a time, as head_of() does: HASH_SEED, then hash_fold() per
 * 8 bytes (the last ones zero-padded), then hash_end(). */
#define HASH_SEED 0x9E3779B97F4A7C15ULL

static inline uint64_t hash_fold(uint64_t h, uint64_t c) {
    h = (h ^ c) * 0xBF58476D1CE4E5B9ULL;
    return h ^ (h >> 31);
}

static inline uint64_t hash_end(uint64_t h, size_t len) {
    return (h ^ len) * 0x94D049BB133111EBULL; /* len tells "ab" from "ab\0" */
}

static uint64_t hash_word(const uint8_t *p, size_t len) {
    uint64_t h = HASH_SEED;
    for (size_t i = 0; i < len; i += 8) h = hash_fold(h, head_of(p + i, len - i));
    return hash_end(h, len);
}

static size_t word_start(const Words *w, uint32_t id) { return id ? w->ends[id - 1] : 0; }

/* Id of the word p[:len] (with hash h and head_of() head), or -1. */
static int64_t words_find(const Words *w, const uint8_t *p, size_t len, uint64_t h, uint64_t head) {
    for (size_t i = (size_t)h & w->mask;; i = (i + 1) & w->mask) {
        const Slot *s = &w->slots[i];
        if (!s->id1) return -1;
        if (s->head != head || s->len != len) continue;
        if (len <= 8 || memcmp(w->bytes + word_start(w, s->id1 - 1) + 8, p + 8, len - 8) == 0) return s->id1 - 1;
    }
}

static void words_put(Slot *slots, size_t mask, const uint8_t *p, size_t len, uint64_t h, uint32_t id) {
    size_t i = (size_t)h & mask;
    while (slots[i].id1) i = (i + 1) & mask;
    slots[i] = (Slot){head_of(p, len), (uint32_t)len, id + 1};
}

static int words_grow_slots(Words *w, size_t size) {
    Slot *slots = PyMem_Calloc(size, sizeof(Slot));
    if (!slots) return -1;
    for (uint32_t id = 0; id < w->count; id++) {
        const uint8_t *p = (const uint8_t *)w->bytes + word_start(w, id);
        size_t len = w->ends[id] - word_start(w, id);
        words_put(slots, size - 1, p, len, hash_word(p, len), id);
    }
    PyMem_Free(w->slots);
    w->slots = slots;
    w->mask = size - 1;
    return 0;
}

static int words_init(Words *w) {
    memset(w, 0, sizeof *w);
    return words_grow_slots(w, 1024);
}

static void words_free(Words *w) {
    PyMem_Free(w->bytes);
    PyMem_Free(w->ends);
    PyMem_Free(w->slots);
    memset(w, 0, sizeof *w);
}

/* Id of p[:len], adding it as the next id when new; -1 with an exception set on failure. */
static int64_t words_add(Words *w, const uint8_t *p, size_t len, uint64_t h) {
    int64_t found = words_find(w, p, len, h, head_of(p, len));
    if (found >= 0) return found;
    if (w->count == UINT32_MAX - 1 || len > UINT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "more than 2^32 - 2 distinct words, or one of 4 GiB");
        return -1;
    }
    if (2 * ((size_t)w->count + 1) > w->mask + 1 && words_grow_slots(w, 2 * (w->mask + 1)) < 0) goto nomem;
    if (w->nbytes + len > w->cap_bytes) {
        size_t cap = 2 * w->cap_bytes + len + 4096;
        char *bytes = PyMem_Realloc(w->bytes, cap);
        if (!bytes) goto nomem;
        w->bytes = bytes;
        w->cap_bytes = cap;
    }
    if (w->count == w->cap_words) {
        size_t cap = 2 * w->cap_words + 1024;
        size_t *ends = PyMem_Realloc(w->ends, cap * sizeof(size_t));
        if (!ends) goto nomem;
        w->ends = ends;
        w->cap_words = cap;
    }
    memcpy(w->bytes + w->nbytes, p, len);
    w->nbytes += len;
    uint32_t id = w->count++;
    w->ends[id] = w->nbytes;
    words_put(w->slots, w->mask, p, len, h, id);
    return id;
nomem:
    PyErr_NoMemory();
    return -1;
}

/* Adds every bytes object of the iterable; 0, or -1 with an exception set. */
static int words_add_all(Words *w, PyObject *iterable, void (*each)(void *, int64_t), void *arg) {
    PyObject *it = PyObject_GetIter(iterable);
    if (!it) return -1;
    PyObject *item;
    while ((item = PyIter_Next(it))) {
        char *p;
        Py_ssize_t len;
        if (PyBytes_AsStringAndSize(item, &p, &len) < 0) {
            Py_DECREF(item);
            Py_DECREF(it);
            return -1;
        }
        int64_t id = words_add(w, (const uint8_t *)p, (size_t)len, hash_word((const uint8_t *)p, (size_t)len));
        Py_DECREF(item);
        if (id < 0) {
            Py_DECREF(it);
            return -1;
        }
        if (each) each(arg, id);
    }
    Py_DECREF(it);
    return PyErr_Occurred() ? -1 : 0;
}

/* ---- tokenizing ------------------------------------------------------------------------ */

/* The ASCII bytes of str `text` (no copy); NULL with ValueError for any other string. */
static const uint8_t *ascii_data(PyObject *text, size_t *len) {
    if (!PyUnicode_Check(text) || !PyUnicode_IS_ASCII(text)) {
        PyErr_SetString(PyExc_ValueError, "expected an ASCII str");
        return NULL;
    }
    *len = (size_t)PyUnicode_GET_LENGTH(text);
    return (const uint8_t *)PyUnicode_DATA(text);
}

/* The token at or after s[*pos]: written lower-cased to buf (room for len bytes), its length
 * returned (0: no more tokens), its hash_word() in *h, head_of() in *head, *pos moved past it.
 * One pass: a second loop over the bytes would cost a second mispredicted exit per token. */
static size_t next_token(const uint8_t *s, size_t len, size_t *pos, uint8_t *buf, uint64_t *h, uint64_t *head) {
    size_t i = *pos, k = 0;
    uint64_t hash = HASH_SEED, c = 0;
    uint8_t b;
    while (i < len && !WORD[s[i]]) i++;
    for (; i < len && (b = WORD[s[i]]); i++, k++) {
        buf[k] = b;
        c |= (uint64_t)b << (8 * (k & 7));
        if ((k & 7) == 7) {
            if (k == 7) *head = c;
            hash = hash_fold(hash, c);
            c = 0;
        }
    }
    if (k & 7) {
        if (k < 8) *head = c;
        hash = hash_fold(hash, c);
    }
    *pos = i;
    *h = hash_end(hash, k);
    return k;
}

/* A scratch buffer of at least `len` bytes, kept between calls. */
static uint8_t *scratch(uint8_t **buf, size_t *cap, size_t len) {
    if (len > *cap) {
        uint8_t *grown = PyMem_Realloc(*buf, len);
        if (!grown) {
            PyErr_NoMemory();
            return NULL;
        }
        *buf = grown;
        *cap = len;
    }
    return *buf;
}

/* ---- Encoder: texts -> one array of word ids, for NgramIndex.build ------------------- */

typedef struct {
    PyObject_HEAD
    Words words;
    uint32_t *ids;
    size_t n_ids, cap_ids;
    uint8_t *buf;
    size_t cap_buf;
} Encoder;

static int encoder_init(Encoder *self, PyObject *args, PyObject *kwds) {
    if (!PyArg_ParseTuple(args, ":Encoder")) return -1;
    words_free(&self->words);
    self->n_ids = 0;
    if (words_init(&self->words) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void encoder_dealloc(Encoder *self) {
    words_free(&self->words);
    PyMem_Free(self->ids);
    PyMem_Free(self->buf);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static void encoder_push(void *arg, int64_t id) {
    Encoder *self = arg;
    self->ids[self->n_ids++] = (uint32_t)id;
}

/* Room for `more` ids (a text of len bytes has at most (len + 1) / 2 tokens). */
static int encoder_reserve(Encoder *self, size_t more) {
    if (self->n_ids + more <= self->cap_ids) return 0;
    size_t cap = 2 * self->cap_ids + more;
    uint32_t *ids = PyMem_Realloc(self->ids, cap * sizeof(uint32_t));
    if (!ids) {
        PyErr_NoMemory();
        return -1;
    }
    self->ids = ids;
    self->cap_ids = cap;
    return 0;
}

/* 0 when __init__ ran, else -1 with an exception set (Encoder.__new__ alone is unusable). */
static int ready(const Words *w) {
    if (w->slots) return 0;
    PyErr_SetString(PyExc_TypeError, "object not initialized");
    return -1;
}

static PyObject *encoder_add_text(Encoder *self, PyObject *text) {
    if (ready(&self->words) < 0) return NULL;
    size_t len, pos = 0, tok_len, before = self->n_ids;
    uint64_t h, head;
    const uint8_t *s = ascii_data(text, &len);
    uint8_t *buf = s ? scratch(&self->buf, &self->cap_buf, len + 1) : NULL;
    if (!buf || encoder_reserve(self, (len + 1) / 2) < 0) return NULL;
    while ((tok_len = next_token(s, len, &pos, buf, &h, &head))) {
        int64_t id = words_add(&self->words, buf, tok_len, h);
        if (id < 0) return NULL;
        encoder_push(self, id);
    }
    return PyLong_FromSize_t(self->n_ids - before);
}

static PyObject *encoder_add_tokens(Encoder *self, PyObject *tokens) {
    if (ready(&self->words) < 0) return NULL;
    size_t before = self->n_ids;
    Py_ssize_t count = PyObject_Length(tokens);
    if (count < 0 || encoder_reserve(self, (size_t)count) < 0) return NULL;
    if (words_add_all(&self->words, tokens, encoder_push, self) < 0) return NULL;
    return PyLong_FromSize_t(self->n_ids - before);
}

static PyObject *encoder_ids(Encoder *self, PyObject *unused) {
    return PyBytes_FromStringAndSize((const char *)self->ids, (Py_ssize_t)(self->n_ids * sizeof(uint32_t)));
}

static PyObject *encoder_words(Encoder *self, PyObject *unused) {
    const Words *w = &self->words;
    PyObject *out = PyList_New(w->count);
    for (uint32_t id = 0; out && id < w->count; id++) {
        size_t start = word_start(w, id);
        PyObject *word = PyBytes_FromStringAndSize(w->bytes + start, (Py_ssize_t)(w->ends[id] - start));
        if (!word) Py_CLEAR(out);
        else PyList_SET_ITEM(out, id, word);
    }
    return out;
}

static PyMethodDef encoder_methods[] = {
    {"add_text", (PyCFunction)encoder_add_text, METH_O,
     "Append the ids of an ASCII text's tokens (new words get the next ids); returns how many."},
    {"add_tokens", (PyCFunction)encoder_add_tokens, METH_O,
     "Append the ids of already tokenized words (a list of bytes); returns how many."},
    {"ids", (PyCFunction)encoder_ids, METH_NOARGS, "Every appended id, as native uint32 bytes."},
    {"words", (PyCFunction)encoder_words, METH_NOARGS, "The words (bytes) in id order."},
    {NULL},
};

static PyTypeObject EncoderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "aes_lib.contamination._ngram.Encoder",
    .tp_doc = "Encoder(): maps texts to word ids, numbering words in order of first use.",
    .tp_basicsize = sizeof(Encoder),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)encoder_init,
    .tp_dealloc = (destructor)encoder_dealloc,
    .tp_methods = encoder_methods,
};

/* ---- Probe: does an ASCII text hash-share a window with the index? ------------------- */

/* The two bits of a hash in its bloom word: from its low bits, independent of the word's (top) bits. */
static inline uint64_t bloom_bits(uint64_t h) { return (1ULL << (h & 63)) | (1ULL << ((h >> 6) & 63)); }

typedef struct {
    PyObject_HEAD
    Words words;
    Py_buffer mixed, hashes;          /* uint64 per word id; the index's sorted window hashes */
    uint64_t *bloom;                  /* 2 bits of one word per hash: drops ~all windows before a search */
    unsigned shift;                   /* word of a hash: hash >> shift */
    size_t n;
    uint64_t base;
    uint64_t *inv_pow;                /* base^-k for k < n */
    uint64_t *ring;                   /* mixed values of the last n tokens */
    uint8_t *buf, *windows;           /* scratch: a token; the text's window hashes */
    size_t cap_buf, cap_windows;
} Probe;

static void probe_dealloc(Probe *self) {
    words_free(&self->words);
    PyBuffer_Release(&self->mixed);
    PyMem_Free(self->bloom);
    PyBuffer_Release(&self->hashes);
    PyMem_Free(self->inv_pow);
    PyMem_Free(self->ring);
    PyMem_Free(self->buf);
    PyMem_Free(self->windows);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static uint64_t inverse(uint64_t odd) {
    uint64_t x = odd; /* Newton's iteration: each step doubles the correct low bits (3 -> 96) */
    for (int i = 0; i < 5; i++) x *= 2 - odd * x;
    return x;
}

static int probe_init(Probe *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"words", "mixed", "hashes", "n", "base", NULL};
    PyObject *words;
    Py_ssize_t n;
    unsigned long long base;
    if (self->mixed.obj) {
        PyErr_SetString(PyExc_TypeError, "Probe is already initialized");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "Oy*y*nK:Probe", kwlist, &words, &self->mixed, &self->hashes,
                                     &n, &base))
        return -1;
    if (n < 1 || !(base & 1) || self->hashes.len % 8) {
        PyErr_SetString(PyExc_ValueError, "need n >= 1, an odd base and uint64 hashes");
        return -1;
    }
    /* 64 bits per hash (~0.1% false positives), at most 32 MiB (22M hashes: ~3%) */
    size_t n_hashes = (size_t)self->hashes.len / 8, n_words = 64;
    const uint64_t *hashes = self->hashes.buf;
    for (self->shift = 58; n_words < n_hashes && n_words < ((size_t)1 << 22); self->shift--) n_words *= 2;
    self->n = (size_t)n;
    self->base = base;
    self->inv_pow = PyMem_Malloc(self->n * sizeof(uint64_t));
    self->ring = PyMem_Malloc(self->n * sizeof(uint64_t));
    self->bloom = PyMem_Calloc(n_words, sizeof(uint64_t));
    if (!self->inv_pow || !self->ring || !self->bloom || words_init(&self->words) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i < n_hashes; i++) self->bloom[hashes[i] >> self->shift] |= bloom_bits(hashes[i]);
    uint64_t inv = inverse(base);
    self->inv_pow[0] = 1;
    for (size_t k = 1; k < self->n; k++) self->inv_pow[k] = self->inv_pow[k - 1] * inv;
    if (words_add_all(&self->words, words, NULL, NULL) == 0) {
        if ((size_t)self->mixed.len >= 8 * (size_t)self->words.count) return 0;
        PyErr_SetString(PyExc_ValueError, "mixed needs one uint64 per word");
    }
    words_free(&self->words); /* unusable: may_share refuses to run */
    return -1;
}

static int sorted_contains(const uint64_t *a, size_t len, uint64_t key) {
    size_t lo = 0, hi = len;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a[mid] < key) lo = mid + 1;
        else hi = mid;
    }
    return lo < len && a[lo] == key;
}

static PyObject *probe_may_share(Probe *self, PyObject *text) {
    if (ready(&self->words) < 0) return NULL;
    size_t len, pos = 0, tok_len, run = 0, oldest = 0, count = 0, n = self->n;
    uint64_t h, head, window = 0;
    const uint8_t *s = ascii_data(text, &len);
    uint8_t *buf = s ? scratch(&self->buf, &self->cap_buf, len + 1) : NULL;
    /* a text of len bytes has at most (len + 1) / 2 tokens, so as many windows */
    uint64_t *windows = buf ? (uint64_t *)scratch(&self->windows, &self->cap_windows, 8 * (len / 2 + 1)) : NULL;
    if (!windows) return NULL;
    const uint64_t *mixed = self->mixed.buf;
    /* `window` is the hash of the last `run` (<= n) tokens, all known words; a word the
     * index never saw can be in no held-out window, so it restarts the run. */
    while ((tok_len = next_token(s, len, &pos, buf, &h, &head))) {
        int64_t id = words_find(&self->words, buf, tok_len, h, head);
        if (id < 0) {
            run = 0;
            window = 0;
            continue;
        }
        uint64_t m = mixed[id];
        if (run < n) {
            window += m * self->inv_pow[run++];
        } else { /* drop the oldest token, shift the rest one power up, add the newest */
            window = (window - self->ring[oldest]) * self->base + m * self->inv_pow[n - 1];
        }
        self->ring[oldest] = m;
        oldest = oldest + 1 == n ? 0 : oldest + 1;
        if (run == n) windows[count++] = window;
    }
    /* Probed apart from the tokenizing loop, the bloom's cache misses overlap one another. */
    const uint64_t *hashes = self->hashes.buf;
    size_t n_hashes = (size_t)self->hashes.len / 8;
    for (size_t i = 0; i < count; i++) {
        uint64_t bits = bloom_bits(windows[i]);
        if ((self->bloom[windows[i] >> self->shift] & bits) == bits && sorted_contains(hashes, n_hashes, windows[i]))
            Py_RETURN_TRUE;
    }
    Py_RETURN_FALSE;
}

static PyMethodDef probe_methods[] = {
    {"may_share", (PyCFunction)probe_may_share, METH_O,
     "False when the ASCII text surely shares no window with the index; True when a window's hash is in it."},
    {NULL},
};

static PyTypeObject ProbeType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "aes_lib.contamination._ngram.Probe",
    .tp_doc = "Probe(words, mixed, hashes, n, base): an index's words (bytes, in id order), their "
              "uint64 mixes, its sorted uint64 window hashes, n and hash base.",
    .tp_basicsize = sizeof(Probe),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)probe_init,
    .tp_dealloc = (destructor)probe_dealloc,
    .tp_methods = probe_methods,
};

/* ---- window_hashes: every in-instruction window of the held-out ids, for build ------- */

static PyObject *window_hashes(PyObject *module, PyObject *args) {
    Py_buffer ids, offsets, mixed;
    Py_ssize_t n;
    unsigned long long base;
    if (!PyArg_ParseTuple(args, "y*y*y*nK:window_hashes", &ids, &offsets, &mixed, &n, &base)) return NULL;
    PyObject *out = NULL, *hashes_obj = NULL, *starts_obj = NULL;
    const uint32_t *id = ids.buf;
    const uint64_t *off = offsets.buf, *mix = mixed.buf;
    size_t n_ids = (size_t)ids.len / 4, n_docs = (size_t)offsets.len / 8, n_mixed = (size_t)mixed.len / 8;
    if (n < 1 || !(base & 1) || n_docs < 1 || off[n_docs - 1] != n_ids || n_ids >= UINT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "need n >= 1, an odd base and offsets ending at len(ids) < 2^32");
        goto done;
    }
    size_t count = 0, w = (size_t)n;
    for (size_t d = 0; d + 1 < n_docs; d++) {
        if (off[d + 1] < off[d] || off[d + 1] > n_ids) {
            PyErr_SetString(PyExc_ValueError, "offsets must ascend");
            goto done;
        }
        count += off[d + 1] - off[d] >= w ? off[d + 1] - off[d] - w + 1 : 0;
    }
    for (size_t i = 0; i < n_ids; i++) {
        if (id[i] >= n_mixed) {
            PyErr_SetString(PyExc_ValueError, "an id has no mixed value");
            goto done;
        }
    }
    hashes_obj = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(count * 8));
    starts_obj = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(count * 4));
    if (!hashes_obj || !starts_obj) goto done;
    uint64_t *hashes = (uint64_t *)PyBytes_AS_STRING(hashes_obj);
    uint32_t *starts = (uint32_t *)PyBytes_AS_STRING(starts_obj);
    uint64_t inv = inverse(base), top = 1; /* top = base^-(n-1) */
    for (size_t k = 1; k < w; k++) top *= inv;
    size_t e = 0;
    for (size_t d = 0; d + 1 < n_docs; d++) {
        size_t lo = off[d], hi = off[d + 1];
        if (hi - lo < w) continue;
        uint64_t h = 0, p = 1;
        for (size_t k = 0; k < w; k++, p *= inv) h += mix[id[lo + k]] * p;
        for (size_t j = lo;; j++) {
            hashes[e] = h;
            starts[e++] = (uint32_t)j;
            if (j + w == hi) break;
            h = (h - mix[id[j]]) * base + mix[id[j + w]] * top;
        }
    }
    out = PyTuple_Pack(2, hashes_obj, starts_obj);
done:
    Py_XDECREF(hashes_obj);
    Py_XDECREF(starts_obj);
    PyBuffer_Release(&ids);
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&mixed);
    return out;
}

static PyMethodDef module_methods[] = {
    {"window_hashes", window_hashes, METH_VARARGS,
     "window_hashes(ids, offsets, mixed, n, base) -> (hashes, starts): native uint64 and uint32 bytes of "
     "every length-n window inside one instruction (ids uint32, offsets uint64, mixed uint64 per id)."},
    {NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "aes_lib.contamination._ngram",
    .m_doc = "The contamination check's hot loops on ASCII text; see aes_lib.contamination.index.",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__ngram(void) {
    for (int c = 0; c < 256; c++) {
        int alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        WORD[c] = alnum || c == '_' ? (uint8_t)(c >= 'A' && c <= 'Z' ? c + 32 : c) : 0;
    }
    if (PyType_Ready(&EncoderType) < 0 || PyType_Ready(&ProbeType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    if (PyModule_AddObjectRef(m, "Encoder", (PyObject *)&EncoderType) < 0 ||
        PyModule_AddObjectRef(m, "Probe", (PyObject *)&ProbeType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
