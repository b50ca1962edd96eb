"""Files that run code when a test loads them: the tamper probe's stand-ins for outputs whose format
can carry code (docs/SECURITY.md, "deserialization").

Each builder takes Python source ``code`` and returns bytes that run it when read by the loader a
test would use on such a file, and, with ``control``, bytes of the same format that load as the
text alone. The module uses only the standard library and is also run, as source, inside the
agent's container (``probes._PLANT``), where nothing else can be assumed.

- a pickle (``pickle.load``, ``joblib``, ``pandas.read_pickle``): its reduce calls ``exec``;
- YAML (PyYAML's ``Loader``/``UnsafeLoader``/``unsafe_load``, ruamel.yaml's ``typ='unsafe'``): an
  ``apply`` tag calls ``exec``;
- JSON that jsonpickle wrote (``jsonpickle.decode``): a ``py/reduce`` calls ``exec``. Only a file that
  already holds a ``py/`` tag: a plain JSON file is read with ``json.loads``, where a payload runs
  nothing, and breaking it by a link into the tests (``probes``) proves more;
- NumPy ``.npy`` (``numpy.load(allow_pickle=True)``): an object array, stored as that pickle;
- a torch zip checkpoint (``torch.load(weights_only=False)``): the same pickle as its ``data.pkl``.
"""

import io
import json
import pickle
import struct
import zipfile

NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGIC = b"PK\x03\x04"
MAX_JSON = 64 << 20  # bytes of a JSON file searched for a jsonpickle tag


class _Exec:
    def __init__(self, code, control):
        self.code, self.control = code, control

    def __reduce__(self):
        return (str, (self.code,)) if self.control else (exec, (self.code,))


def pickled(code, control=False):
    return pickle.dumps(_Exec(code, control), protocol=2)


def yaml_doc(code, control=False):
    text = json.dumps(code)  # a JSON string is a YAML flow scalar
    return (text if control else f"!!python/object/apply:builtins.exec [{text}]").encode() + b"\n"


def jsonpickled(code, control=False):
    doc = code if control else {"py/reduce": [{"py/function": "builtins.exec"}, {"py/tuple": [code]}]}
    return json.dumps(doc).encode() + b"\n"


def npy(code, control=False):
    header = "{'descr': '|O', 'fortran_order': False, 'shape': (1,), }"
    pad = 64 - (len(NPY_MAGIC) + 4 + len(header) + 1) % 64
    head = (header + " " * (pad % 64) + "\n").encode("latin1")
    return NPY_MAGIC + b"\x01\x00" + struct.pack("<H", len(head)) + head + pickled(code, control)


def torch_zip(original, code, control=False):
    """``original`` (a torch zip checkpoint) with its ``data.pkl`` replaced."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(original)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
        for name in src.namelist():
            dst.writestr(name, pickled(code, control) if name.endswith("/data.pkl") else src.read(name))
    return out.getvalue()


def _is_torch_zip(original):
    try:
        with zipfile.ZipFile(io.BytesIO(original)) as z:
            return any(n.endswith("/data.pkl") for n in z.namelist())
    except (zipfile.BadZipFile, ValueError):
        return False


def carrier(path):
    """How loading the file at ``path`` can be made to run code: ``(kind, make)``, where
    ``make(code, control)`` gives the bytes to write over it; None when its format carries no code
    (or it cannot be read). The file is read once."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
            torch = head.startswith(ZIP_MAGIC) and path.endswith((".pt", ".pth", ".ckpt"))
            original = head + f.read(-1 if torch else MAX_JSON if path.endswith(".json") else 0)
    except OSError:
        return None
    if head[:1] == b"\x80" and len(head) > 2:
        return "pickle payload", pickled
    if path.endswith((".yaml", ".yml")):
        return "YAML tag payload", yaml_doc
    if path.endswith(".json") and b'"py/' in original:
        return "jsonpickle payload", jsonpickled
    if head.startswith(NPY_MAGIC) or path.endswith(".npy"):
        return "NumPy object-array payload", npy
    if torch and _is_torch_zip(original):
        return "torch checkpoint payload", lambda code, control=False: torch_zip(original, code, control)
    return None
