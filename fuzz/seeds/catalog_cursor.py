#!/usr/bin/env python3
"""Writes the seeds of the catalog_cursor fuzz target into
fuzz/seeds/catalog_cursor/: cursors of the target's query as the registry
signs them with its development key (the format of registry/src/catalog.rs,
`c2~<key id>~<revision>~<query fingerprint>~<last capability id>~<mac>`),
the same fields without the envelope (the target's signed mode), capability
IDs (its round-trip mode) and malformed cursors. Run it again when the
cursor format changes; the target's round trip checks the real format on
every input either way.

    python3 fuzz/seeds/catalog_cursor.py
"""

import hashlib
import hmac
import os
import struct

DEV_KEY_ID = "dev"
DEV_SECRET = b"connreg development cursor key; never deploy"
FUZZ_KEY_ID = "fuzz"


def fingerprint(reader: str) -> str:
    """The fingerprint of a first-page query with no filter."""
    h = hashlib.md5()
    for part in [reader.encode(), b"\0", b"\0", b"\0"]:
        h.update(struct.pack(">Q", len(part)))
        h.update(part)
    return h.hexdigest()[:16]


def sign(body: str, secret: bytes) -> str:
    return body + "~" + hmac.new(secret, body.encode(), hashlib.sha256).hexdigest()[:32]


# The target's query: Reader::Internal { include_unbound: false }.
FP = fingerprint("internal:false")
OTHER_FP = fingerprint("internal:true")

seeds = {
    "cursor": sign(f"c2~{DEV_KEY_ID}~7~{FP}~crm.contact.create", DEV_SECRET),
    "cursor-revision-0": sign(f"c2~{DEV_KEY_ID}~0~{FP}~a", DEV_SECRET),
    "cursor-revision-max": sign(
        f"c2~{DEV_KEY_ID}~18446744073709551615~{FP}~crm:contact_create-v2", DEV_SECRET
    ),
    "cursor-other-query": sign(f"c2~{DEV_KEY_ID}~7~{OTHER_FP}~crm.contact.create", DEV_SECRET),
    "cursor-edited-revision": sign(f"c2~{DEV_KEY_ID}~7~{FP}~crm.contact.create", DEV_SECRET).replace(
        "~7~", "~8~"
    ),
    "cursor-unknown-key": sign(f"c2~k2~7~{FP}~crm.contact.create", DEV_SECRET),
    "cursor-v1": f"v1~7~crm.contact.create~0123abcd",
    "cursor-short-mac": sign(f"c2~{DEV_KEY_ID}~7~{FP}~crm.contact.create", DEV_SECRET)[:-2],
    "cursor-extra-field": sign(f"c2~{DEV_KEY_ID}~7~{FP}~crm~contact", DEV_SECRET),
    "fields": f"7~{FP}~crm.contact.create",
    "fields-revision-overflow": f"18446744073709551616~{FP}~crm.contact.create",
    "fields-bad-capability": f"7~{FP}~crm contact/create",
    "fields-empty-capability": f"7~{FP}~",
    "fields-long-capability": f"7~{FP}~" + "c" * 128,
    "capability": "crm.contact.create",
    "capability-long": "c" * 126,
    "empty": "",
    "tildes": "~~~~~",
}

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "catalog_cursor")
os.makedirs(out, exist_ok=True)
for name, text in seeds.items():
    with open(os.path.join(out, name), "w", encoding="utf-8") as f:
        f.write(text)
print(f"{len(seeds)} seeds in {out}")
