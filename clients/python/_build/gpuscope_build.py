"""A PEP 517 / PEP 660 build back end for the gpuscope client, standard library only: a wheel is a
zip of the gpuscope/ package and its dist-info, an sdist a tar of this folder, an editable install
a .pth file pointing here. It exists so `pip install clients/python` works with no package index."""
import base64
import hashlib
import io
import os
import tarfile
import zipfile

NAME = "gpuscope"
VERSION = "0.1.0"
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TAG = "py3-none-any"
METADATA = (f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\n"
            "Summary: The training job's side of gpuscope: step timing, metrics, params and marks\n"
            "Requires-Python: >=3.8\nLicense: MIT\n")


def _package_files():
    pkg = os.path.join(HERE, NAME)
    for name in sorted(os.listdir(pkg)):
        if name.endswith(".py"):
            yield f"{NAME}/{name}", os.path.join(pkg, name)


def _wheel(wheel_directory, files):
    """files: (archive name, bytes). Returns the wheel's file name."""
    dist = f"{NAME}-{VERSION}.dist-info"
    files = list(files) + [
        (f"{dist}/METADATA", METADATA.encode()),
        (f"{dist}/WHEEL", f"Wheel-Version: 1.0\nGenerator: gpuscope_build\nRoot-Is-Purelib: true\nTag: {TAG}\n".encode()),
    ]
    record = []
    for arc, data in files:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{arc},sha256={digest},{len(data)}")
    record.append(f"{dist}/RECORD,,")
    files.append((f"{dist}/RECORD", ("\n".join(record) + "\n").encode()))
    whl = f"{NAME}-{VERSION}-{TAG}.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, whl), "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in files:
            z.writestr(arc, data)
    return whl


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = []
    for arc, path in _package_files():
        with open(path, "rb") as f:
            files.append((arc, f.read()))
    return _wheel(wheel_directory, files)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory, [(f"{NAME}.pth", (HERE + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    base = f"{NAME}-{VERSION}"
    out = os.path.join(sdist_directory, base + ".tar.gz")
    with tarfile.open(out, "w:gz") as t:
        for rel in ["pyproject.toml", "_build/gpuscope_build.py"] + [a for a, _ in _package_files()]:
            t.add(os.path.join(HERE, rel), arcname=f"{base}/{rel}")
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        data = METADATA.encode()
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    return base + ".tar.gz"
