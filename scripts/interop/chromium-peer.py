#!/usr/bin/env python3
"""A headless Chromium as one side of a call, speaking `tether call`'s JSON-lines protocol.

Offers or answers with a real RTCPeerConnection (Debian's chromium, driven through the DevTools
protocol on a pipe), plays a WAV file as its microphone, and reports what it hears: on stdin it
takes the peer's offer/answer (with --trickle, candidate) lines and the commands `restart` (pc.restartIce() and a re-offer),
`report`, `dtmf` and `hangup`; on stdout it prints offer/answer lines, state lines and, for
`report`, a report line with the connection and DTLS states, packet counts, the dominant frequency
of the received audio and the audio sender's canInsertDTMF. Facts about the flags:
shared/notes/ENVIRONMENT.md, "WebRTC peers".

DTMF (RFC 4733 through the audio sender's RTCDTMFSender): `dtmf 123#` or
{"type":"dtmf","tones":"123#","duration":100,"gap":70} (milliseconds; these are the defaults, and
Chromium clamps them) calls insertDTMF(tones, duration, gap); an empty tones string cancels the
tones not yet played. It prints {"type":"dtmf-queued","toneBuffer":…,"canInsertDTMF":true}, or
{"type":"dtmf-error","message":…,"canInsertDTMF":…} when the sender has no `dtmf`, canInsertDTMF is
false (the answer has no telephone-event at all: with only telephone-event/8000 beside opus,
Chromium 156 sends at 8000 and canInsertDTMF is true) or insertDTMF throws (a tone not in
"0123456789ABCD#*,"). Then, from the page's tonechange events (polled every 0.1 s, in order),
{"type":"dtmf-sent","tone":"1"} as each tone starts (`,` is a 2 s pause) and {"type":"dtmf-done"}
when the buffer is empty. A JSON dtmf line without string tones is ignored.
"""
import argparse, http.server, json, os, select, shutil, socketserver, subprocess, sys, tempfile, threading, time

PAGE = r"""<!doctype html><html><body><script>
let pc, analyser, ctx;
const PREFER_RED = false;
const TRICKLE = false;
let candidates = [];
function log(o) { console.log(JSON.stringify(o)); }
async function setup() {
  const stream = await navigator.mediaDevices.getUserMedia({audio: true});
  pc = new RTCPeerConnection({bundlePolicy: 'max-bundle', rtcpMuxPolicy: 'require'});
  // Trickle ICE: every candidate, and the end (a null candidate), as RTCIceCandidateInit.
  pc.onicecandidate = e => candidates.push(e.candidate ? e.candidate.toJSON() : {candidate: '', sdpMid: '0', sdpMLineIndex: 0});
  stream.getTracks().forEach(t => pc.addTrack(t, stream));
  if (PREFER_RED) {
    // RED (RFC 2198) first, as an application does to have Chromium send it.
    const codecs = RTCRtpReceiver.getCapabilities('audio').codecs;
    const isRed = c => c.mimeType.toLowerCase() === 'audio/red';
    pc.getTransceivers()[0].setCodecPreferences([...codecs.filter(isRed), ...codecs.filter(c => !isRed(c))]);
  }
  pc.ontrack = e => {
    ctx = new AudioContext({sampleRate: 48000});
    const src = ctx.createMediaStreamSource(e.streams[0]);
    analyser = ctx.createAnalyser(); analyser.fftSize = 16384; analyser.smoothingTimeConstant = 0.5;
    src.connect(analyser);
    const a = new Audio(); a.srcObject = e.streams[0]; a.muted = true; a.play();
  };
}
function takeCandidates() { const c = candidates; candidates = []; return TRICKLE ? c : []; }
async function addCandidate(c) {
  if (!c.candidate) { await pc.addIceCandidate(); return 'end'; }
  await pc.addIceCandidate(c); return 'ok';
}
function gathered() {
  if (TRICKLE) return Promise.resolve();
  return new Promise(r => {
    if (pc.iceGatheringState === 'complete') return r();
    pc.addEventListener('icegatheringstatechange', () => { if (pc.iceGatheringState === 'complete') r(); });
  });
}
async function makeOffer(restart) {
  if (!pc) await setup();
  if (restart) pc.restartIce();
  await pc.setLocalDescription(await pc.createOffer());
  await gathered();
  return pc.localDescription.sdp;
}
async function applyAnswer(sdp) { await pc.setRemoteDescription({type: 'answer', sdp}); return 'ok'; }
async function acceptOffer(sdp) {
  if (!pc) await setup();
  await pc.setRemoteDescription({type: 'offer', sdp});
  await pc.setLocalDescription(await pc.createAnswer());
  await gathered();
  return pc.localDescription.sdp;
}
function peakHertz() {
  if (!analyser) return 0;
  const bins = new Float32Array(analyser.frequencyBinCount);
  analyser.getFloatFrequencyData(bins);
  let best = 0;
  for (let i = 1; i < bins.length; i++) if (bins[i] > bins[best]) best = i;
  return bins[best] > -90 ? best * ctx.sampleRate / analyser.fftSize : 0;
}
async function report() {
  const r = await pc.getStats();
  const out = {connectionState: pc.connectionState, iceConnectionState: pc.iceConnectionState, receivedPeakHertz: peakHertz(), canInsertDTMF: canInsertDTMF()};
  r.forEach(s => {
    if (s.type === 'inbound-rtp' && s.kind === 'audio') {
      out.packetsReceived = s.packetsReceived; out.packetsLost = s.packetsLost; out.totalAudioEnergy = s.totalAudioEnergy;
      out.concealedSamples = s.concealedSamples; out.totalSamplesReceived = s.totalSamplesReceived;
      if (s.codecId && r.get(s.codecId)) out.receivedCodec = r.get(s.codecId).mimeType;
    }
    if (s.type === 'outbound-rtp' && s.kind === 'audio') {
      out.packetsSent = s.packetsSent; out.bytesSent = s.bytesSent; out.headerBytesSent = s.headerBytesSent;
      out.targetBitrate = s.targetBitrate;
      if (s.codecId && r.get(s.codecId)) out.sentCodec = r.get(s.codecId).mimeType;
    }
    if (s.type === 'candidate-pair' && (out.pairBytesSent === undefined || s.bytesSent > out.pairBytesSent)) {
      out.pairBytesSent = s.bytesSent; out.pairPacketsSent = s.packetsSent; out.availableOutgoingBitrate = s.availableOutgoingBitrate;
    }
    if (s.type === 'transport') { out.dtlsState = s.dtlsState; out.tlsVersion = s.tlsVersion; out.srtpCipher = s.srtpCipher; out.dtlsRole = s.dtlsRole; out.selectedCandidatePairChanges = s.selectedCandidatePairChanges; }
  });
  return JSON.stringify(out);
}
let dtmfEvents = [];
function audioSender() { return pc && pc.getSenders().find(s => s.track && s.track.kind === 'audio'); }
function canInsertDTMF() { const s = audioSender(); return !!(s && s.dtmf && s.dtmf.canInsertDTMF); }
function sendDTMF(tones, duration, gap) {
  const s = audioSender(), dtmf = s && s.dtmf;
  if (!dtmf) return {type: 'dtmf-error', message: 'the audio sender has no dtmf', canInsertDTMF: false};
  if (!dtmf.canInsertDTMF) return {type: 'dtmf-error', message: 'canInsertDTMF is false', canInsertDTMF: false};
  dtmf.ontonechange = e => dtmfEvents.push(e.tone ? {type: 'dtmf-sent', tone: e.tone} : {type: 'dtmf-done'});
  try { dtmf.insertDTMF(tones, duration, gap); }
  catch (e) { return {type: 'dtmf-error', message: `${e.name}: ${e.message}`, canInsertDTMF: true}; }
  return {type: 'dtmf-queued', toneBuffer: dtmf.toneBuffer, canInsertDTMF: true};
}
function takeDTMFEvents() { const e = dtmfEvents; dtmfEvents = []; return e; }
function hangUp() { pc.close(); return 'ok'; }
</script></body></html>"""


class CDP:
    """The DevTools protocol over --remote-debugging-pipe (fd 3 in, fd 4 out, NUL-framed JSON)."""

    def __init__(self, to_browser, from_browser):
        self.w, self.r, self.next_id, self.buffer = to_browser, from_browser, 0, b""

    def call(self, method, params=None, session=None, timeout=30):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.w, json.dumps(msg).encode() + b"\0")
        deadline = time.time() + timeout
        while True:
            while b"\0" in self.buffer:
                frame, self.buffer = self.buffer.split(b"\0", 1)
                reply = json.loads(frame)
                if reply.get("id") == self.next_id:
                    if "error" in reply:
                        raise RuntimeError(f"{method}: {reply['error']}")
                    return reply.get("result", {})
            left = deadline - time.time()
            if left <= 0 or not select.select([self.r], [], [], left)[0]:
                raise TimeoutError(method)
            chunk = os.read(self.r, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the pipe")
            self.buffer += chunk

    def evaluate(self, session, expression, timeout=30):
        result = self.call("Runtime.evaluate", {"expression": expression, "awaitPromise": True, "returnByValue": True}, session, timeout)
        if "exceptionDetails" in result:
            raise RuntimeError(result["exceptionDetails"].get("exception", {}).get("description", str(result["exceptionDetails"])))
        return result["result"].get("value")


def out(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--role", choices=["offer", "answer"], required=True)
    p.add_argument("--audio", required=True, help="WAV file the fake microphone loops")
    p.add_argument("--chromium", default="/usr/lib/chromium/chromium")
    p.add_argument("--mdns", action="store_true", help="hide host addresses behind .local names, as browsers do by default")
    p.add_argument("--prefer-red", action="store_true", help="put RED (RFC 2198) first in the codec preferences, so Chromium sends it")
    p.add_argument("--trickle", action="store_true",
                   help="trickle ICE: descriptions leave at once, candidates follow as candidate lines (an empty one ends them); "
                   "the peer's candidate lines are added with addIceCandidate")
    args = p.parse_args()

    folder = tempfile.mkdtemp(prefix="tether-chromium-")
    with open(os.path.join(folder, "index.html"), "w") as f:
        f.write(PAGE.replace("const PREFER_RED = false;", f"const PREFER_RED = {'true' if args.prefer_red else 'false'};")
                .replace("const TRICKLE = false;", f"const TRICKLE = {'true' if args.trickle else 'false'};"))
    handler = lambda *a, **k: http.server.SimpleHTTPRequestHandler(*a, directory=folder, **k)
    http.server.SimpleHTTPRequestHandler.log_message = lambda *a: None
    server = socketserver.TCPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/index.html"

    to_child_r, to_child_w = os.pipe()
    from_child_r, from_child_w = os.pipe()

    def plumbing():
        os.dup2(to_child_r, 3)
        os.dup2(from_child_w, 4)

    flags = ["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", f"--user-data-dir={folder}/profile",
             "--remote-debugging-pipe", "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
             f"--use-file-for-fake-audio-capture={args.audio}", "--autoplay-policy=no-user-gesture-required",
             "--allow-loopback-in-peer-connection"] + ([] if args.mdns else ["--disable-features=WebRtcHideLocalIpsWithMdns"]) + ["about:blank"]
    browser = subprocess.Popen([args.chromium] + flags, pass_fds=(3, 4), preexec_fn=plumbing,
                               stdout=subprocess.DEVNULL, stderr=open(os.path.join(folder, "chromium.log"), "w"))
    os.close(to_child_r)
    os.close(from_child_w)
    cdp = CDP(to_child_w, from_child_r)
    try:
        target = cdp.call("Target.createTarget", {"url": url})["targetId"]
        session = cdp.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for _ in range(100):
            if cdp.evaluate(session, "typeof makeOffer") == "function":
                break
            time.sleep(0.05)
        started = time.time()
        state = None

        def report_state():
            nonlocal state
            now = cdp.evaluate(session, "pc ? pc.connectionState : 'new'")
            if now != state:
                state = now
                out({"type": "state", "state": now, "seconds": round(time.time() - started, 3)})

        if args.role == "offer":
            out({"type": "offer", "sdp": cdp.evaluate(session, "makeOffer(false)"), "restart": False})
        offers_sent, pending = 0, b""
        while True:
            # stdin is read unbuffered: lines that arrive together are all handled now, not at the next input.
            ready = b"\n" in pending or select.select([sys.stdin], [], [], 0.1)[0]
            if pc_ready := cdp.evaluate(session, "!!pc"):
                report_state()
                for event in cdp.evaluate(session, "takeDTMFEvents()"):
                    out(event)
                for candidate in cdp.evaluate(session, "takeCandidates()"):
                    candidate["type"] = "candidate"
                    out(candidate)
            if not ready:
                continue
            if b"\n" not in pending:
                chunk = os.read(sys.stdin.fileno(), 1 << 20)
                if not chunk and not pending:
                    break
                pending += chunk or b"\n"
                if b"\n" not in pending:
                    continue
            line, pending = pending.split(b"\n", 1)
            line = line.decode().strip()
            try:
                word, _, tones = line.partition(" ")
                msg = json.loads(line) if line.startswith("{") else {"type": "dtmf", "tones": tones.strip()} if word == "dtmf" else {"type": line}
            except json.JSONDecodeError:
                continue
            kind = msg.get("type")
            if kind == "offer":
                answer = cdp.evaluate(session, f"acceptOffer({json.dumps(msg['sdp'])})")
                out({"type": "answer", "sdp": answer, "restart": bool(msg.get("restart"))})
            elif kind == "answer":
                cdp.evaluate(session, f"applyAnswer({json.dumps(msg['sdp'])})")
            elif kind == "candidate":
                init = {k: msg[k] for k in ("candidate", "sdpMid", "sdpMLineIndex", "usernameFragment") if msg.get(k) is not None}
                cdp.evaluate(session, f"addCandidate({json.dumps(init)})")
            elif kind == "restart":
                out({"type": "offer", "sdp": cdp.evaluate(session, "makeOffer(true)"), "restart": True})
            elif kind == "report":
                rep = json.loads(cdp.evaluate(session, "report()"))
                rep["type"] = "report"
                out(rep)
            elif kind == "dtmf" and isinstance(msg.get("tones"), str):
                call = f"sendDTMF({json.dumps(msg['tones'])}, {json.dumps(msg.get('duration', 100))}, {json.dumps(msg.get('gap', 70))})"
                out(cdp.evaluate(session, call))
            elif kind == "hangup":
                cdp.evaluate(session, "hangUp()")
                out({"type": "state", "state": "ended", "seconds": round(time.time() - started, 3)})
                break
    finally:
        browser.kill()
        browser.wait()
        server.shutdown()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
