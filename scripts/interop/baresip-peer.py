#!/usr/bin/env python3
"""baresip (Debian's baresip-core 1.0) as one side of a call, speaking `tether call`'s JSON lines.

An SDES-SRTP SIP softphone as a real third-party peer. This script is the SIP side baresip talks
to: a minimal user agent on 127.0.0.1 that turns the JSON offer/answer lines into INVITE,
200 OK and ACK (and BYE) with baresip, which auto-answers and plays a sine (`ausine`), and whose
received audio `sndfile` records. On stdin: the peer's offer/answer lines, `report`, `hangup`; on
stdout: offer/answer lines, state lines, and report lines (the dominant frequency of the last
second baresip decoded, and whether baresip logged SRTP errors).
"""
import argparse, glob, json, os, random, re, select, shutil, socket, subprocess, sys, tempfile, time

from tones import dominant_hertz, wav_samples


def out(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def token():
    return "%016x" % random.getrandbits(64)


class SIP:
    """Just enough SIP over UDP on 127.0.0.1 for one call with baresip (RFC 3261 §§ 8, 12, 13, 17)."""

    def __init__(self, peer_port):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.peer = ("127.0.0.1", peer_port)
        self.call_id, self.local_tag, self.remote_tag, self.cseq = token(), token()[:8], None, 1
        self.remote_target, self.invite = f"sip:baresip@127.0.0.1:{peer_port}", None

    def send(self, text, to=None):
        self.sock.sendto(text.encode(), to or self.peer)

    def request(self, method, body="", cseq=None):
        lines = [f"{method} {self.remote_target} SIP/2.0",
                 f"Via: SIP/2.0/UDP 127.0.0.1:{self.port};branch=z9hG4bK{token()};rport", "Max-Forwards: 70",
                 f"From: <sip:tether@127.0.0.1:{self.port}>;tag={self.local_tag}",
                 f"To: <sip:baresip@127.0.0.1:{self.peer[1]}>" + (f";tag={self.remote_tag}" if self.remote_tag else ""),
                 f"Call-ID: {self.call_id}", f"CSeq: {cseq or self.cseq} {method}",
                 f"Contact: <sip:tether@127.0.0.1:{self.port}>", "User-Agent: tether-interop"]
        if body:
            lines.append("Content-Type: application/sdp")
        lines.append(f"Content-Length: {len(body.encode())}")
        self.send("\r\n".join(lines) + "\r\n\r\n" + body)

    def respond(self, request, code, phrase, body=""):
        head, _ = split(request)
        lines = [f"SIP/2.0 {code} {phrase}"]
        for name in ("via", "from", "to", "call-id", "cseq"):
            for value in head.get(name, []):
                if name == "to" and code != 100 and "tag=" not in value:
                    value += f";tag={self.local_tag}"
                lines.append(f"{name.title() if name != 'call-id' else 'Call-ID'}: {value}")
        lines.append(f"Contact: <sip:tether@127.0.0.1:{self.port}>")
        if body:
            lines.append("Content-Type: application/sdp")
        lines.append(f"Content-Length: {len(body.encode())}")
        self.send("\r\n".join(lines) + "\r\n\r\n" + body)

    def receive(self, timeout):
        if not select.select([self.sock], [], [], timeout)[0]:
            return None
        return self.sock.recv(65536).decode(errors="replace")


def split(message):
    """Headers (lower-case name → values) and body of a SIP message; the start line under ''."""
    head, _, body = message.partition("\r\n\r\n")
    lines = head.split("\r\n")
    headers = {"": [lines[0]]}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers.setdefault(name.strip().lower(), []).append(value.strip())
    return headers, body


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--role", choices=["offer", "answer"], required=True)
    p.add_argument("--hertz", type=int, default=1000, help="the sine baresip sends")
    args = p.parse_args()

    folder = tempfile.mkdtemp(prefix="tether-baresip-")
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    probe.bind(("127.0.0.1", 0))
    sip_port = probe.getsockname()[1]
    probe.close()
    ctrl = socket.socket()
    ctrl.bind(("127.0.0.1", 0))
    ctrl_port = ctrl.getsockname()[1]
    ctrl.close()
    with open(os.path.join(folder, "config"), "w") as f:
        f.write(f"""module_path /usr/lib/baresip/modules
sip_listen 127.0.0.1:{sip_port}
audio_player aubridge,nil
audio_source ausine,{args.hertz}
audio_alert aubridge,nil
rtcp_mux yes
jitter_buffer_delay 2-10
opus_inbandfec yes
snd_path {folder}
ctrl_tcp_listen 127.0.0.1:{ctrl_port}
module opus.so
module ausine.so
module aubridge.so
module srtp.so
module ice.so
module sndfile.so
module_tmp account.so
module_app menu.so
module_app ctrl_tcp.so
""")
    with open(os.path.join(folder, "accounts"), "w") as f:
        f.write("<sip:baresip@127.0.0.1>;regint=0;mediaenc=srtp-mand;medianat=ice;audio_codecs=opus/48000/2;answermode=auto\n")
    log = open(os.path.join(folder, "baresip.log"), "w")
    baresip = subprocess.Popen(["baresip", "-4", "-f", folder], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    sip = SIP(sip_port)
    started = time.time()
    time.sleep(0.5)  # baresip binds its sockets

    def control(command, params=""):
        payload = json.dumps({"command": command, "params": params, "token": token()}).encode()
        with socket.create_connection(("127.0.0.1", ctrl_port), timeout=5) as c:
            c.sendall(str(len(payload)).encode() + b":" + payload + b",")

    def report():
        dumps = sorted(glob.glob(os.path.join(folder, "*-dec.wav")), key=os.path.getmtime)
        with open(os.path.join(folder, "baresip.log")) as f:
            text = f.read()
        return {"type": "report", "receivedPeakHertz": dominant_hertz(*wav_samples(dumps[-1])) if dumps else 0,
                "srtpErrors": len(re.findall(r"srtp: failed", text)), "established": "established" in text}

    if args.role == "answer":
        pass  # wait for the peer's offer on stdin, then INVITE baresip with it
    else:
        # baresip calls us: its INVITE carries the offer.
        for _ in range(20):
            try:
                control("dial", f"sip:tether@127.0.0.1:{sip.port}")
                break
            except OSError:
                time.sleep(0.25)
    answered_at = None
    pending_200 = None
    try:
        while baresip.poll() is None:
            ready = select.select([sys.stdin, sip.sock], [], [], 0.1)[0]
            if pending_200 and time.time() - pending_200[1] > 0.5:
                sip.send(pending_200[0], pending_200[2])
                pending_200 = (pending_200[0], time.time(), pending_200[2])
            if sip.sock in ready:
                message, source = sip.sock.recvfrom(65536)
                message = message.decode(errors="replace")
                headers, body = split(message)
                start = headers[""][0]
                if start.startswith("SIP/2.0"):
                    code = int(start.split()[1])
                    if code == 200 and "INVITE" in headers.get("cseq", [""])[0] and answered_at is None:
                        answered_at = time.time()
                        sip.remote_tag = re.search(r"tag=([^;>\s]+)", headers["to"][0]).group(1)
                        m = re.search(r"<([^>]+)>", headers.get("contact", [""])[0])
                        if m:
                            sip.remote_target = m.group(1)
                        sip.request("ACK", cseq=1)
                        out({"type": "answer", "sdp": body, "restart": False})
                        out({"type": "state", "state": "established", "seconds": round(time.time() - started, 3)})
                elif start.startswith("INVITE"):
                    sip.invite = (message, source)
                    sip.remote_tag = re.search(r"tag=([^;>\s]+)", headers["from"][0]).group(1)
                    sip.call_id = headers["call-id"][0]
                    m = re.search(r"<([^>]+)>", headers.get("contact", [""])[0])
                    if m:
                        sip.remote_target = m.group(1)
                    sip.respond(message, 100, "Trying")
                    out({"type": "offer", "sdp": body, "restart": False})
                elif start.startswith("ACK"):
                    pending_200 = None
                    out({"type": "state", "state": "established", "seconds": round(time.time() - started, 3)})
                elif start.startswith("BYE"):
                    sip.respond(message, 200, "OK")
                    out({"type": "state", "state": "ended", "seconds": round(time.time() - started, 3)})
                    break
            if sys.stdin in ready:
                line = sys.stdin.readline()
                if not line:
                    break
                line = line.strip()
                try:
                    msg = json.loads(line) if line.startswith("{") else {"type": line}
                except json.JSONDecodeError:
                    continue
                kind = msg.get("type")
                if kind == "offer" and not msg.get("restart") and args.role == "answer":
                    sip.request("INVITE", msg["sdp"])
                elif kind == "answer" and not msg.get("restart") and sip.invite:
                    request, source = sip.invite
                    ok = build_200(sip, request, msg["sdp"])
                    sip.send(ok, source)
                    pending_200 = (ok, time.time(), source)  # sent again until baresip's ACK (UDP)
                elif kind == "report":
                    out(report())
                elif kind == "hangup":
                    sip.cseq += 1
                    sip.request("BYE")
                    out({"type": "state", "state": "ended", "seconds": round(time.time() - started, 3)})
                    time.sleep(0.3)
                    break
    finally:
        baresip.terminate()
        try:
            baresip.wait(timeout=3)
        except subprocess.TimeoutExpired:
            baresip.kill()
        if os.environ.get("TETHER_KEEP_BARESIP"):
            sys.stderr.write(f"baresip folder kept: {folder}\n")
        else:
            shutil.rmtree(folder, ignore_errors=True)


def build_200(sip, request, body):
    head, _ = split(request)
    lines = ["SIP/2.0 200 OK"]
    for name in ("via", "from", "to", "call-id", "cseq"):
        for value in head.get(name, []):
            if name == "to" and "tag=" not in value:
                value += f";tag={sip.local_tag}"
            lines.append(f"{'Call-ID' if name == 'call-id' else name.title()}: {value}")
    lines.append(f"Contact: <sip:tether@127.0.0.1:{sip.port}>")
    lines.append("Content-Type: application/sdp")
    lines.append(f"Content-Length: {len(body.encode())}")
    return "\r\n".join(lines) + "\r\n\r\n" + body


if __name__ == "__main__":
    main()
