#!/usr/bin/env python3
"""baresip (Debian's baresip-core 1.0) as one side of a call, speaking `tether call`'s JSON lines.

An SDES-SRTP SIP softphone as a real third-party peer. This script is the SIP side baresip talks
to: a minimal user agent on 127.0.0.1 that turns the JSON offer/answer lines into INVITE,
200 OK and ACK (and BYE) with baresip, which auto-answers and plays a sine (`ausine`), and whose
received audio `sndfile` records. baresip is driven through its `ctrl_tcp` module (one
connection: commands in, UA events such as CALL_DTMF_START out).

On stdin (JSON lines, or bare words: `hold`, `dtmf 123#`):
- the peer's offer and answer lines. restart false: the call's first exchange (INVITE, 200 OK).
  An offer with restart true is a re-offer (hold, resume, ICE restart): sent to baresip as a
  re-INVITE once no other exchange is under way (again 2 s after a 491), its 200 OK printed as
  an answer line with restart true. An answer line answers baresip's pending (re-)INVITE (also
  the one baresip sends after ICE completes when it called), whatever its restart flag; an error
  line while that INVITE waits refuses it (488). baresip 1.0 cannot restart ICE: it answers a
  restart offer with its old ICE credentials.
- report: prints a report line (below).
- hold / resume ({"type":"hold"}): baresip puts the call on hold (re-INVITE with a=sendonly;
  it then neither sends nor plays audio) or resumes it (a=sendrecv); the re-INVITE's SDP is
  printed as an offer line with restart true, and the answer line that follows goes back in the
  200 OK. Asked of baresip's `/hold` and `/resume`: a second hold (or a resume when not held)
  does nothing.
- dtmf DIGITS ({"type":"dtmf","digits":"123#"}): baresip sends the digits (0-9 * # A-D; others
  are dropped) as RFC 4733 telephone-events (`/sndcode`): 9 packets (180 ms) each, back to back,
  with 3 end packets. baresip 1.0 labels them telephone-event/8000 (the only rate it offers,
  as payload type 101, or accepts) but counts timestamps and durations at the codec's 48 kHz, so an
  RFC-reading receiver sees 1080 ms. Nothing is sent while baresip holds.
- hangup: baresip's side sends BYE.
On stdout: offer/answer lines, state lines (established, ended) and report lines:
- receivedPeakHertz: dominant frequency of the last quarter second baresip decoded, from its
  `sndfile` recording; 0 when that recording did not grow in the last half second (it holds only
  what arrived: no packets, no samples). receivedRmsDbfs: the level of that quarter second (null
  when nothing recent); receivedSecondsAgo: the recording's age (null: none yet).
- recording: whether that recording still goes on. baresip 1.0 drops its decode filters (and so
  `sndfile`) for good at the first re-negotiation that is not sendrecv (a hold either way), so
  after a hold the frequency is unknown (0) even when audio flows again: use
  receivedPacketsPerSecond (RTP packets baresip received in about the last second, from its
  `audio_debug`; polled, so null until two polls; counts what arrives even while baresip holds).
- direction: the a= direction in the audio section of baresip's last accepted SDP (offer or
  answer): sendrecv, sendonly (baresip holds), recvonly or inactive (baresip answering a hold).
- dtmf: the digits baresip received as RFC 4733 telephone-events, in order ("123#");
  dtmfMilliseconds: for each, the wall-clock time between baresip's events for its first packet
  and its first end packet (about the tone's length less one 20 ms packet; null while the digit
  has not ended). baresip logs each as "received event: '1' (end=0)", then (end=1).
- srtpErrors: how many SRTP failures baresip logged; established: whether it logged one.
"""
import argparse, glob, json, math, os, re, select, shutil, socket, subprocess, sys, tempfile, time

from sipmsg import response, split, token
from tones import dominant_hertz, wav_samples


def out(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


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

    def request(self, method, body="", cseq=None, branch=None):
        """Sends a request in the dialog; returns its Via branch (an ACK for a non-2xx reuses it)."""
        branch = branch or "z9hG4bK" + token()
        lines = [f"{method} {self.remote_target} SIP/2.0",
                 f"Via: SIP/2.0/UDP 127.0.0.1:{self.port};branch={branch};rport", "Max-Forwards: 70",
                 f"From: <sip:tether@127.0.0.1:{self.port}>;tag={self.local_tag}",
                 f"To: <sip:baresip@127.0.0.1:{self.peer[1]}>" + (f";tag={self.remote_tag}" if self.remote_tag else ""),
                 f"Call-ID: {self.call_id}", f"CSeq: {cseq or self.cseq} {method}",
                 f"Contact: <sip:tether@127.0.0.1:{self.port}>", "User-Agent: tether-interop"]
        if body:
            lines.append("Content-Type: application/sdp")
        lines.append(f"Content-Length: {len(body.encode())}")
        self.send("\r\n".join(lines) + "\r\n\r\n" + body)
        return branch

    def respond(self, request, code, phrase, body="", to=None):
        """A response to `request` (sent to `to`, baresip's address by default); returns its text."""
        text = response(request, code, phrase, self.local_tag, f"sip:tether@127.0.0.1:{self.port}", body)
        self.send(text, to)
        return text


class Control:
    """baresip's ctrl_tcp: netstring JSON; commands in, responses and UA events out. It takes
    one connection at a time (a new one replaces the old), so this one is kept for the call."""

    def __init__(self, port):
        for _ in range(40):
            try:
                self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
                break
            except OSError:
                time.sleep(0.25)
        else:
            raise SystemExit("baresip's ctrl_tcp does not answer")
        self.buffer = b""

    def send(self, command, params=""):
        payload = json.dumps({"command": command, "params": params, "token": token()}).encode()
        self.sock.sendall(str(len(payload)).encode() + b":" + payload + b",")

    def messages(self):
        """The JSON objects that arrived (call when the socket is readable)."""
        data = self.sock.recv(65536)
        if not data:
            raise SystemExit("baresip closed ctrl_tcp")
        self.buffer += data
        found = []
        while b":" in self.buffer:
            size, _, rest = self.buffer.partition(b":")
            if len(rest) < int(size) + 1:
                break
            found.append(json.loads(rest[:int(size)]))
            self.buffer = rest[int(size) + 1:]
        return found


def direction(sdp):
    """The direction attribute of an SDP's audio section (sendrecv when none; inactive at port 0)."""
    audio = sdp[sdp.find("m=audio"):]
    audio = audio[:audio.find("\nm=", 1)] if "\nm=" in audio else audio
    if re.match(r"m=audio 0 ", audio):
        return "inactive"
    m = re.search(r"^a=(sendrecv|sendonly|recvonly|inactive)\s*$", audio, re.M)
    return m.group(1) if m else "sendrecv"


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
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    ctrl_port = probe.getsockname()[1]
    probe.close()
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
    # baresip adds telephone-event/8000 (payload type 101) to every audio section by itself.
    with open(os.path.join(folder, "accounts"), "w") as f:
        f.write("<sip:baresip@127.0.0.1>;regint=0;mediaenc=srtp-mand;medianat=ice;audio_codecs=opus/48000/2;answermode=auto\n")
    log = open(os.path.join(folder, "baresip.log"), "w")
    baresip = subprocess.Popen(["baresip", "-4", "-f", folder], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    sip = SIP(sip_port)
    started = time.time()
    ctrl = Control(ctrl_port)
    dtmf = []  # [digit, start time, milliseconds or None] per telephone-event baresip received
    polls = []  # (time, RTP packets received, whether sndfile still records) from audio_debug
    baresip_sdp = ""  # what baresip last offered (and was answered) or answered

    def report():
        dumps = sorted(glob.glob(os.path.join(folder, "*-dec.wav")), key=os.path.getmtime)
        with open(os.path.join(folder, "baresip.log")) as f:
            text = f.read()
        hertz, level, ago = 0, None, None
        if dumps:
            ago = time.time() - os.path.getmtime(dumps[-1])
            samples, rate = wav_samples(dumps[-1])
            if ago < 0.5 and len(samples) >= rate // 4:
                hertz = dominant_hertz(samples, rate)
                last = samples[-(rate // 4):]
                rms = math.sqrt(sum(x * x for x in last) / len(last))
                level = round(20 * math.log10(max(rms, 1) / 32768), 1)
        recent = [q for q in polls if q[0] > time.time() - 1.3]
        rate = None
        if len(recent) >= 2 and recent[-1][0] > recent[0][0]:
            rate = round((recent[-1][1] - recent[0][1]) / (recent[-1][0] - recent[0][0]))
        return {"type": "report", "receivedPeakHertz": hertz, "receivedRmsDbfs": level,
                "receivedSecondsAgo": None if ago is None else round(ago, 3),
                "recording": polls[-1][2] if polls else bool(dumps), "receivedPacketsPerSecond": rate,
                "direction": direction(baresip_sdp),
                "dtmf": "".join(d[0] for d in dtmf), "dtmfMilliseconds": [d[2] for d in dtmf],
                "srtpErrors": len(re.findall(r"srtp: failed", text)), "established": "established" in text}

    if args.role == "offer":
        ctrl.send("dial", f"sip:tether@127.0.0.1:{sip.port}")  # baresip calls us: its INVITE carries the offer
    established = False
    pending_200 = None  # our 200 OK to baresip's (re-)INVITE, sent again until its ACK (UDP)
    outgoing = None  # CSeq, Via branch and SDP of our INVITE that awaits its final response
    acked = set()  # CSeqs of our INVITEs answered and acknowledged (a retransmitted 200 is ACKed again)
    queued, retry_at = None, 0.0  # a re-offer that waits for the exchange under way (or after a 491)
    polled = 0.0
    stdin_buffer, stdin_closed = b"", False
    try:
        while baresip.poll() is None:
            if established and time.time() - polled > 0.25:
                ctrl.send("audio_debug")  # the answer feeds receivedPacketsPerSecond and recording
                polled = time.time()
            if queued and established and not (outgoing or sip.invite or pending_200) and time.time() >= retry_at:
                sip.cseq += 1
                outgoing = (sip.cseq, sip.request("INVITE", queued, cseq=sip.cseq), queued)
                queued = None
            # stdin is read unbuffered: a second line already in Python's buffer would wait for
            # the next one to make select() return.
            inputs = [sip.sock, ctrl.sock] + ([] if stdin_closed else [sys.stdin])
            ready = select.select(inputs, [], [], 0 if b"\n" in stdin_buffer else 0.1)[0]
            if pending_200 and time.time() - pending_200[1] > 0.5:
                sip.send(pending_200[0], pending_200[2])
                pending_200 = (pending_200[0], time.time(), pending_200[2])
            if ctrl.sock in ready:
                for event in ctrl.messages():
                    if event.get("type") == "CALL_DTMF_START":
                        dtmf.append([event.get("param", "?"), time.time(), None])
                    elif event.get("type") == "CALL_DTMF_END" and dtmf and dtmf[-1][2] is None:
                        dtmf[-1][2] = round((time.time() - dtmf[-1][1]) * 1000)
                    elif event.get("response") and "--- Audio stream ---" in event.get("data", ""):
                        # "IP=192.0.2.2:5132 psent=0 rcvd=128": packets from the peer's SSRC;
                        # " audio rx pipeline:    aubridge <--- sndfile <--- opus"
                        data = event["data"]
                        m = re.search(r"rcvd=(\d+)", data)
                        pipeline = re.search(r"rx pipeline:(.*)", data)
                        if m:
                            polls.append((time.time(), int(m.group(1)), bool(pipeline) and "sndfile" in pipeline.group(1)))
                            del polls[:-20]
                    elif event.get("response") and not event.get("ok"):
                        sys.stderr.write(f"baresip refused a command: {event}\n")
            if sip.sock in ready:
                message, source = sip.sock.recvfrom(65536)
                message = message.decode(errors="replace")
                headers, body = split(message)
                start = headers[""][0]
                if start.startswith("SIP/2.0"):
                    code = int(start.split()[1])
                    number, method = headers.get("cseq", ["0 ?"])[0].split()
                    number = int(number)
                    if method != "INVITE" or code < 200:
                        pass
                    elif number in acked:
                        sip.request("ACK", cseq=number)  # the 200 OK again: our ACK was lost
                    elif outgoing and number == outgoing[0] and code < 300:
                        outgoing = None
                        acked.add(number)
                        sip.remote_tag = re.search(r"tag=([^;>\s]+)", headers["to"][0]).group(1)
                        m = re.search(r"<([^>]+)>", headers.get("contact", [""])[0])
                        if m:
                            sip.remote_target = m.group(1)
                        sip.request("ACK", cseq=number)
                        baresip_sdp = body or baresip_sdp
                        out({"type": "answer", "sdp": body, "restart": established})
                        if not established:
                            established = True
                            out({"type": "state", "state": "established", "seconds": round(time.time() - started, 3)})
                    elif outgoing and number == outgoing[0]:
                        # Refused. The ACK of a failure belongs to the INVITE's transaction (same
                        # branch). A 491: baresip's own re-INVITE crossed ours; ours goes again
                        # after 2 s (RFC 3261 § 14.1), baresip retries after 1 or 3 s.
                        sip.request("ACK", cseq=number, branch=outgoing[1])
                        sys.stderr.write(f"baresip refused our INVITE: {start}\n")
                        if code == 491:
                            queued, retry_at = outgoing[2], time.time() + 2
                        elif not established:
                            out({"type": "state", "state": "ended", "sipCode": code, "seconds": round(time.time() - started, 3)})
                            break
                        outgoing = None
                elif start.startswith("INVITE"):
                    in_dialog = "tag=" in headers["to"][0]
                    if sip.invite and split(sip.invite[0])[0]["cseq"] == headers["cseq"]:
                        sip.respond(message, 100, "Trying", to=source)  # retransmitted
                    elif in_dialog and (outgoing or sip.invite or pending_200):
                        sip.respond(message, 491, "Request Pending", to=source)  # RFC 3261 § 14.2
                    else:
                        sip.invite = (message, source)
                        if not in_dialog:
                            sip.remote_tag = re.search(r"tag=([^;>\s]+)", headers["from"][0]).group(1)
                            sip.call_id = headers["call-id"][0]
                        m = re.search(r"<([^>]+)>", headers.get("contact", [""])[0])
                        if m:
                            sip.remote_target = m.group(1)
                        sip.respond(message, 100, "Trying", to=source)
                        out({"type": "offer", "sdp": body, "restart": in_dialog})
                elif start.startswith("ACK"):
                    if pending_200 and not established:  # (not the ACK of a refusal)
                        established = True
                        out({"type": "state", "state": "established", "seconds": round(time.time() - started, 3)})
                    pending_200 = None
                elif start.startswith("BYE"):
                    sip.respond(message, 200, "OK", to=source)
                    out({"type": "state", "state": "ended", "seconds": round(time.time() - started, 3)})
                    break
                else:
                    sip.respond(message, 501, "Not Implemented", to=source)
            if sys.stdin in ready:
                data = os.read(sys.stdin.fileno(), 65536)
                stdin_buffer, stdin_closed = stdin_buffer + data, not data
            if b"\n" in stdin_buffer or (stdin_closed and stdin_buffer):
                line, _, stdin_buffer = stdin_buffer.partition(b"\n")
                line = line.decode(errors="replace").strip()
                try:
                    msg = json.loads(line) if line.startswith("{") else {"type": line.split()[0] if line else ""}
                except json.JSONDecodeError:
                    continue
                kind = msg.get("type")
                if kind == "offer" and not msg.get("restart") and args.role == "answer" and not outgoing:
                    outgoing = (1, sip.request("INVITE", msg["sdp"], cseq=1), msg["sdp"])
                elif kind == "offer" and msg.get("restart"):
                    queued = msg["sdp"]  # sent as a re-INVITE once nothing else is under way
                elif kind == "answer" and sip.invite:
                    request, source = sip.invite
                    ok = sip.respond(request, 200, "OK", msg["sdp"], to=source)
                    baresip_sdp = split(request)[1] or baresip_sdp
                    pending_200 = (ok, time.time(), source)
                    sip.invite = None
                elif kind == "error" and sip.invite:
                    # Tether could not take baresip's offer: refuse the (re-)INVITE.
                    request, source = sip.invite
                    sip.respond(request, 488, "Not Acceptable Here", to=source)
                    sip.invite = None
                elif kind in ("hold", "resume"):
                    ctrl.send(kind)
                elif kind == "dtmf":
                    # baresip stops at a character it cannot send and then never ends the last
                    # digit, so only digits go to it.
                    digits = msg.get("digits") if line.startswith("{") else "".join(line.split()[1:])
                    digits = re.sub(r"[^0-9*#A-Da-d]", "", digits or "")
                    if digits:
                        ctrl.send("sndcode", digits)
                elif kind == "report":
                    out(report())
                elif kind == "hangup":
                    sip.cseq += 1
                    sip.request("BYE")
                    out({"type": "state", "state": "ended", "seconds": round(time.time() - started, 3)})
                    time.sleep(0.3)
                    break
            elif stdin_closed:
                break  # end of input
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


if __name__ == "__main__":
    main()
