#!/usr/bin/env python3
"""One baresip → baresip call through a UDP relay, for the quality bench's baresip column.

Usage: baresip_call.py --clip CLIP.wav --relay-port-a PA --relay-port-b PB --out HEARD.wav
                       [--bitrate 32000] [--fec yes|no] [--expected-loss PERCENT] [--seconds S]
                       [--player-pcm PCM --record-source SOURCE]

Two Debian baresip 1.0 processes on 127.0.0.1, SDES-SRTP (`mediaenc=srtp-mand`), no ICE, Opus
48 kHz at the given bitrate with in-band FEC for the expected loss (baresip does not adapt it:
libopus makes no FEC at 0 %), `rtcp_mux`. Caller A plays CLIP (`aufile`, which
takes the stream's two channels: a stereo copy made with sox) once;
callee B auto-answers. With --player-pcm, B plays what it hears through that ALSA PCM (the
private PulseAudio daemon's null sink through the pulse plugin, scripts/with-test-audio.sh) and
the sink's monitor (--record-source) is recorded with parecord: what a listener hears, in the
device's time, as Tether's rows are recorded. Without it, `sndfile` records B's decoder output,
which has no clock: a frame lost and never concealed is simply missing from the file (bursty loss
took a second out of a 14 s recording), and PESQ, which realigns, forgives that far more than the
silence a listener hears. Either way the result is copied to HEARD.wav. B plays the same clip back.

This script is the SIP between them: a back-to-back user agent that takes A's INVITE, gives B the
offer with A's media address replaced by the relay's B-facing port (PB), and gives A B's answer
with B's media address replaced by the relay's A-facing port (PA). The relay (the bench's own
UDPImpairmentRelay, with the same loss as Tether's rows) learns each side's real address from
its first packet. After the clip (and a second of tail) both calls get a BYE.

Prints one JSON line: {"recording": HEARD.wav, "seconds": ..., "srtpErrors": ...} or
{"error": "..."}.
"""
import argparse, glob, json, os, re, select, shutil, socket, subprocess, sys, tempfile, time, wave

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "interop"))
from sipmsg import response, split, token  # noqa: E402  (shared with scripts/interop/baresip-peer.py)


def free_port(kind):
    s = socket.socket(socket.AF_INET, kind)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def media_at(sdp, port):
    """The SDP with its audio port (and any a=rtcp port) set to `port` on 127.0.0.1."""
    sdp = re.sub(r"^c=IN IP4 \S+", "c=IN IP4 127.0.0.1", sdp, flags=re.M)
    sdp = re.sub(r"^(m=audio )\d+", lambda m: m.group(1) + str(port), sdp, flags=re.M)
    sdp = re.sub(r"^a=rtcp:\d+.*$", f"a=rtcp:{port}", sdp, flags=re.M)
    return sdp


def baresip(folder, name, sip_port, ctrl_port, clip, bitrate, fec, loss, player="aubridge,nil"):
    os.makedirs(folder)
    with open(os.path.join(folder, "config"), "w") as f:
        f.write(f"""module_path /usr/lib/baresip/modules
sip_listen 127.0.0.1:{sip_port}
audio_player {player}
audio_source aufile,{clip}
audio_alert aubridge,nil
rtcp_mux yes
opus_bitrate {bitrate}
opus_inbandfec {fec}
opus_packet_loss {loss}
snd_path {folder}
ctrl_tcp_listen 127.0.0.1:{ctrl_port}
module opus.so
{"module alsa.so" if player.startswith("alsa,") else ""}
module aufile.so
module aubridge.so
module srtp.so
module sndfile.so
module_tmp account.so
module_app menu.so
module_app ctrl_tcp.so
""")
    with open(os.path.join(folder, "accounts"), "w") as f:
        f.write(f"<sip:{name}@127.0.0.1>;regint=0;mediaenc=srtp-mand;audio_codecs=opus/48000/2;answermode=auto\n")
    log = open(os.path.join(folder, "baresip.log"), "w")
    return subprocess.Popen(["baresip", "-4", "-f", folder], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)


def control(port, command, params=""):
    """One ctrl_tcp command (netstring JSON), retried until baresip listens."""
    for _ in range(40):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            break
        except OSError:
            time.sleep(0.25)
    else:
        raise RuntimeError("baresip's ctrl_tcp does not answer")
    payload = json.dumps({"command": command, "params": params, "token": token()}).encode()
    s.sendall(str(len(payload)).encode() + b":" + payload + b",")
    return s


def clip_seconds(path):
    with wave.open(path, "rb") as w:
        return w.getnframes() / w.getframerate()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--clip", required=True)
    p.add_argument("--relay-port-a", type=int, required=True)
    p.add_argument("--relay-port-b", type=int, required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--bitrate", type=int, default=32000)
    p.add_argument("--fec", choices=["yes", "no"], default="yes")
    p.add_argument("--expected-loss", type=int, default=0,
                   help="opus_packet_loss: the loss (percent) baresip's encoder protects against with FEC")
    p.add_argument("--seconds", type=float, default=None)
    p.add_argument("--player-pcm", default=None,
                   help="B plays through this ALSA PCM (a clocked device) instead of recording its decoder's output")
    p.add_argument("--record-source", default=None,
                   help="with --player-pcm: the PulseAudio source (the sink's monitor) recorded as HEARD.wav")
    args = p.parse_args()
    if bool(args.player_pcm) != bool(args.record_source):
        p.error("--player-pcm and --record-source go together")

    root = tempfile.mkdtemp(prefix="tether-baresip-pair-")
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    our_port = sock.getsockname()[1]
    ports = {side: (free_port(socket.SOCK_DGRAM), free_port(socket.SOCK_STREAM)) for side in "ab"}
    # baresip's aufile wants the stream's channel count: Opus runs as 2 channels.
    stereo = os.path.join(root, "clip-stereo.wav")
    subprocess.run(["sox", args.clip, "-c", "2", stereo], check=True)
    players = {"a": "aubridge,nil", "b": f"alsa,{args.player_pcm}" if args.player_pcm else "aubridge,nil"}
    processes = {side: baresip(os.path.join(root, side), side, ports[side][0], ports[side][1], stereo,
                               args.bitrate, args.fec, args.expected_loss, players[side]) for side in "ab"}
    recorder = None
    if args.record_source:
        # What B's device plays, with the device's timing: a frame baresip has not got in time
        # is silence here, as it is for a listener (its decoder output alone has no clock).
        recorder = subprocess.Popen(["parecord", f"--device={args.record_source}", "--rate=48000", "--channels=1",
                                     "--format=s16le", "--file-format=wav", os.path.join(root, "heard.wav")])
    result = {}
    try:
        # B up first (its control port answers once its SIP listener is): A's INVITE is
        # forwarded to B at once, and a B still starting dropped it.
        ctrl_b = control(ports["b"][1], "listcalls")
        ctrl_a = control(ports["a"][1], "dial", f"sip:b@127.0.0.1:{our_port}")
        b_addr = ("127.0.0.1", ports["b"][0])
        call_id_b, tag_b_local = token(), token()[:8]
        invite_a = None  # (message, source) of A's INVITE
        ok_a = None  # our 200 OK to A, resent until A's ACK
        b_answered = None  # (to-tag, contact) of B's 200 OK
        a_info = {}
        started = time.time()
        duration = args.seconds or clip_seconds(args.clip) + 1.0
        media_started = None
        branch_b = "z9hG4bK" + token()
        # Our INVITE to B, retransmitted until B answers anything (RFC 3261 timer A: 0.5 s,
        # doubling): [text, last sent, interval], or None once B has responded.
        invite_b = None

        def to_b(method, body="", cseq=1, branch=None):
            """Sends a request to B; returns its bytes."""
            lines = [f"{method} sip:b@127.0.0.1:{ports['b'][0]} SIP/2.0",
                     f"Via: SIP/2.0/UDP 127.0.0.1:{our_port};branch={branch or 'z9hG4bK' + token()};rport", "Max-Forwards: 70",
                     f"From: <sip:a@127.0.0.1:{our_port}>;tag={tag_b_local}",
                     f"To: <sip:b@127.0.0.1:{ports['b'][0]}>" + (f";tag={b_answered[0]}" if b_answered else ""),
                     f"Call-ID: {call_id_b}", f"CSeq: {cseq} {method}", f"Contact: <sip:a@127.0.0.1:{our_port}>"]
            if body:
                lines.append("Content-Type: application/sdp")
            lines.append(f"Content-Length: {len(body.encode())}")
            data = ("\r\n".join(lines) + "\r\n\r\n" + body).encode()
            sock.sendto(data, b_addr)
            return data

        def respond(request, source, code, phrase, body=""):
            text = response(request, code, phrase, a_info.setdefault("tag", token()[:8]), f"sip:b@127.0.0.1:{our_port}", body)
            sock.sendto(text.encode(), source)
            return text

        while True:
            if any(proc.poll() is not None for proc in processes.values()):
                raise RuntimeError("a baresip process ended early")
            if time.time() - started > duration + 20:
                raise RuntimeError("the call did not run its course (no answer?)")
            if media_started and time.time() - media_started > duration:
                break
            if invite_b and time.time() - invite_b[1] > invite_b[2]:
                sock.sendto(invite_b[0], b_addr)
                invite_b = [invite_b[0], time.time(), min(4.0, invite_b[2] * 2)]
            if ok_a and time.time() - ok_a[1] > 0.5:
                sock.sendto(ok_a[0].encode(), ok_a[2])
                ok_a = (ok_a[0], time.time(), ok_a[2])
            ready = select.select([sock], [], [], 0.1)[0]
            if not ready:
                continue
            message, source = sock.recvfrom(65536)
            message = message.decode(errors="replace")
            headers, body = split(message)
            start = headers[""][0]
            if start.startswith("INVITE") and source[1] == ports["a"][0]:
                respond(message, source, 100, "Trying")
                if invite_a is None:
                    invite_a = (message, source)
                    a_info["contact"] = re.search(r"<([^>]+)>", headers["contact"][0]).group(1)
                    a_info["from"] = headers["from"][0]
                    a_info["call-id"] = headers["call-id"][0]
                    invite_b = [to_b("INVITE", media_at(body, args.relay_port_b), branch=branch_b), time.time(), 0.5]
            elif start.startswith("SIP/2.0") and source[1] == ports["b"][0]:
                code = int(start.split()[1])
                number, method = headers["cseq"][0].split()
                if method == "INVITE":
                    invite_b = None  # B has it
                if method == "INVITE" and code >= 300:
                    raise RuntimeError(f"baresip B refused the call: {start}")
                if method == "INVITE" and 200 <= code < 300:
                    first = b_answered is None
                    b_answered = (re.search(r"tag=([^;>\s]+)", headers["to"][0]).group(1), None)
                    to_b("ACK", cseq=int(number))
                    if first:
                        text = respond(invite_a[0], invite_a[1], 200, "OK", media_at(body, args.relay_port_a))
                        ok_a = (text, time.time(), invite_a[1])
            elif start.startswith("ACK") and source[1] == ports["a"][0]:
                if ok_a and media_started is None:
                    media_started = time.time()
                ok_a = None
            elif start.startswith("BYE"):
                respond(message, source, 200, "OK")
            elif not start.startswith("SIP/2.0"):
                respond(message, source, 501, "Not Implemented")

        # BYE to B (its recording closes) and to A.
        to_b("BYE", cseq=2)
        a_from_tag = re.search(r"tag=([^;>\s]+)", a_info["from"]).group(1)
        bye = [f"BYE {a_info['contact']} SIP/2.0", f"Via: SIP/2.0/UDP 127.0.0.1:{our_port};branch=z9hG4bK{token()};rport",
               "Max-Forwards: 70", f"From: <sip:b@127.0.0.1:{our_port}>;tag={a_info['tag']}",
               f"To: {a_info['from']}", f"Call-ID: {a_info['call-id']}", "CSeq: 1 BYE", "Content-Length: 0"]
        sock.sendto(("\r\n".join(bye) + "\r\n\r\n").encode(), ("127.0.0.1", ports["a"][0]))
        time.sleep(0.5)
        if recorder:
            recorder.terminate()
            recorder.wait(timeout=5)
        for proc in processes.values():
            proc.terminate()
        for proc in processes.values():
            try:
                proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                proc.kill()
        recordings = [os.path.join(root, "heard.wav")] if recorder else sorted(
            glob.glob(os.path.join(root, "b", "*-dec.wav")), key=os.path.getsize)
        if not recordings or not os.path.exists(recordings[-1]):
            raise RuntimeError("baresip B recorded nothing")
        shutil.copyfile(recordings[-1], args.out)
        with open(os.path.join(root, "b", "baresip.log")) as f:
            log = f.read()
        result = {"recording": args.out, "seconds": round(time.time() - started, 2),
                  "srtpErrors": len(re.findall(r"srtp: failed", log))}
        del ctrl_a, ctrl_b
    except Exception as error:  # reported to the bench, which shows it under "not scored"
        result = {"error": f"{type(error).__name__}: {error}"}
    finally:
        if recorder and recorder.poll() is None:
            recorder.kill()
        for proc in processes.values():
            if proc.poll() is None:
                proc.kill()
        if os.environ.get("TETHER_KEEP_BARESIP"):
            sys.stderr.write(f"baresip folders kept: {root}\n")
        else:
            shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(result))
    return 0 if "recording" in result else 1


if __name__ == "__main__":
    sys.exit(main())
