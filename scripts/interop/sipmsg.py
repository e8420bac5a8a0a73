"""The few SIP message helpers the baresip scripts share (baresip-peer.py for the interop tests,
Benchmarks/quality/baresip_call.py for the quality bench): just enough of RFC 3261 for one call
with baresip on 127.0.0.1."""
import random


def token():
    """A random 64-bit hex string (Call-ID, tags, branches, ctrl_tcp tokens)."""
    return "%016x" % random.getrandbits(64)


def split(message):
    """Headers (lower-case name → values) and body of a SIP message; the start line under ''."""
    head, _, body = message.partition("\r\n\r\n")
    lines = head.split("\r\n")
    headers = {"": [lines[0]]}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers.setdefault(name.strip().lower(), []).append(value.strip())
    return headers, body


def response(request, code, phrase, tag, contact, body=""):
    """The text of a response to `request`: its Via, From, To (with our `tag` added beyond a 100),
    Call-ID and CSeq, our `contact` URI, and `body` as SDP when given."""
    head, _ = split(request)
    lines = [f"SIP/2.0 {code} {phrase}"]
    for name in ("via", "from", "to", "call-id", "cseq"):
        for value in head.get(name, []):
            if name == "to" and code != 100 and "tag=" not in value:
                value += f";tag={tag}"
            lines.append(f"{name.title() if name != 'call-id' else 'Call-ID'}: {value}")
    lines.append(f"Contact: <{contact}>")
    if body:
        lines.append("Content-Type: application/sdp")
    lines.append(f"Content-Length: {len(body.encode())}")
    return "\r\n".join(lines) + "\r\n\r\n" + body
