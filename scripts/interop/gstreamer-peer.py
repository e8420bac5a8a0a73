#!/usr/bin/python3
"""GStreamer + libnice as one side of a call, speaking `tether call`'s JSON-lines protocol.

An SDES-SRTP peer assembled from stock parts, as a media gateway would be: a libnice agent
(GObject introspection) for ICE, and GStreamer's opusenc/rtpopuspay/srtpenc/nicesink and
nicesrc/srtpdec/rtpopusdepay/opusdec pipelines, Opus on payload type 96 (Tether prefers 111).
Runs with Debian's python3 (python3-gi). On stdin: the peer's offer/answer, `report`, `hangup`;
on stdout: offer/answer lines, state lines, report lines (the dominant frequency of the last
quarter second decoded, packets received).
"""
import argparse, base64, json, os, random, re, sys, tempfile, threading, time

import gi

gi.require_version("Gst", "1.0")
gi.require_version("Nice", "0.1")
from gi.repository import GLib, Gst, Nice  # noqa: E402

from tones import dominant_hertz, wav_samples  # noqa: E402

OFFERED_PT = 96  # offers use 96 (Tether prefers 111); answers take the offer's


def out(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


class Peer:
    def __init__(self, role, address, hertz, folder):
        self.role, self.folder = role, folder
        self.context = GLib.MainContext.default()
        self.agent = Nice.Agent.new(self.context, Nice.Compatibility.RFC5245)
        self.agent.set_property("upnp", False)
        self.agent.set_property("controlling-mode", role == "offer")
        a = Nice.Address()
        a.set_from_string(address)
        self.agent.add_local_address(a)
        self.stream = self.agent.add_stream(1)
        self.gathered = threading.Event()
        self.agent.connect("candidate-gathering-done", lambda *_: self.gathered.set())
        self.agent.connect("component-state-changed", self.on_state)
        self.key = os.urandom(30)
        self.remote_key = None
        self.received = os.path.join(folder, "received.wav")
        self.started = time.time()
        self.state = None
        self.hertz = hertz
        self.pipeline = None
        self.pt = OFFERED_PT

    def on_state(self, agent, stream, component, state):
        name = Nice.component_state_to_string(state)
        if name != self.state:
            self.state = name
            out({"type": "state", "state": name, "seconds": round(time.time() - self.started, 3)})

    def gather(self):
        self.agent.gather_candidates(self.stream)
        while not self.gathered.is_set():
            self.context.iteration(True)

    def description(self):
        ok, ufrag, pwd = self.agent.get_local_credentials(self.stream)
        candidates = [self.agent.generate_local_candidate_sdp(c) for c in self.agent.get_local_candidates(self.stream, 1)]
        host = next((c for c in self.agent.get_local_candidates(self.stream, 1)), None)
        port = host.addr.get_port() if host else 9
        lines = ["v=0", f"o=- {random.getrandbits(32)} 1 IN IP4 127.0.0.1", "s=-", "t=0 0",
                 f"m=audio {port} RTP/SAVP {self.pt}", "c=IN IP4 127.0.0.1", f"a=rtpmap:{self.pt} opus/48000/2",
                 f"a=fmtp:{self.pt} useinbandfec=1", "a=ptime:20", "a=rtcp-mux", f"a=ice-ufrag:{ufrag}", f"a=ice-pwd:{pwd}",
                 f"a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:{base64.b64encode(self.key).decode()}"]
        lines += candidates + ["a=sendrecv"]
        return "\r\n".join(lines) + "\r\n"

    def apply_remote(self, sdp, answer_tag=None):
        ufrag = re.search(r"a=ice-ufrag:(\S+)", sdp).group(1)
        pwd = re.search(r"a=ice-pwd:(\S+)", sdp).group(1)
        if self.role == "answer":
            self.pt = int(re.search(r"a=rtpmap:(\d+) opus/48000", sdp, re.IGNORECASE).group(1))
        crypto = re.search(r"a=crypto:(\d+) AES_CM_128_HMAC_SHA1_80 inline:([A-Za-z0-9+/=]+)", sdp)
        self.remote_key = base64.b64decode(crypto.group(2))[:30]
        self.agent.set_remote_credentials(self.stream, ufrag, pwd)
        remote = []
        for line in sdp.split("\r\n"):
            if line.startswith("a=candidate:") and " udp " in line.lower():
                c = self.agent.parse_remote_candidate_sdp(self.stream, line)
                if c is not None:
                    remote.append(c)
        self.agent.set_remote_candidates(self.stream, 1, remote)
        return crypto.group(1)

    def start_media(self):
        key = Gst.Buffer.new_wrapped(self.key)
        send = Gst.parse_launch(
            f"audiotestsrc wave=sine freq={self.hertz} volume=0.3 is-live=true ! audioconvert ! audioresample ! "
            f"audio/x-raw,rate=48000,channels=1 ! opusenc inband-fec=true ! rtpopuspay pt={self.pt} ! "
            "srtpenc name=enc rtp-cipher=aes-128-icm rtp-auth=hmac-sha1-80 rtcp-cipher=aes-128-icm rtcp-auth=hmac-sha1-80 ! "
            "nicesink name=out")
        send.get_by_name("enc").set_property("key", key)
        sink = send.get_by_name("out")
        sink.set_property("agent", self.agent)
        sink.set_property("stream", self.stream)
        sink.set_property("component", 1)
        receive = Gst.parse_launch(
            f"nicesrc name=in ! application/x-srtp,media=audio,payload={self.pt},clock-rate=48000,encoding-name=OPUS ! "
            f"srtpdec name=dec ! rtpopusdepay ! opusdec plc=true ! audioconvert ! audioresample ! "
            f"audio/x-raw,format=S16LE,rate=48000,channels=1 ! wavenc ! filesink location={self.received}")
        source = receive.get_by_name("in")
        source.set_property("agent", self.agent)
        source.set_property("stream", self.stream)
        source.set_property("component", 1)
        remote_key = Gst.Buffer.new_wrapped(self.remote_key)

        def request_key(_dec, ssrc):
            return make_caps(remote_key)

        receive.get_by_name("dec").connect("request-key", request_key)
        self.pipeline = (send, receive)
        for p in self.pipeline:
            p.set_state(Gst.State.PLAYING)

    def stop(self):
        if self.pipeline:
            for p in self.pipeline:
                p.send_event(Gst.Event.new_eos())
                p.set_state(Gst.State.NULL)


def make_caps(key):
    caps = Gst.Caps.from_string(
        "application/x-srtp,srtp-cipher=(string)aes-128-icm,srtp-auth=(string)hmac-sha1-80,"
        "srtcp-cipher=(string)aes-128-icm,srtcp-auth=(string)hmac-sha1-80")
    caps.set_value("srtp-key", key)
    return caps


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--role", choices=["offer", "answer"], required=True)
    p.add_argument("--local-address", default="127.0.0.1")
    p.add_argument("--hertz", type=int, default=1000)
    args = p.parse_args()
    Gst.init(None)
    folder = tempfile.mkdtemp(prefix="tether-gst-")
    peer = Peer(args.role, args.local_address, args.hertz, folder)
    peer.gather()
    if args.role == "offer":
        out({"type": "offer", "sdp": peer.description(), "restart": False})
    lines = []
    lock = threading.Lock()

    def read():
        for line in sys.stdin:
            with lock:
                lines.append(line.strip())
        with lock:
            lines.append(None)

    threading.Thread(target=read, daemon=True).start()
    while True:
        peer.context.iteration(False)
        with lock:
            pending, lines[:] = lines[:], []
        done = False
        for line in pending:
            if line is None:
                done = True
                break
            try:
                msg = json.loads(line) if line.startswith("{") else {"type": line}
            except json.JSONDecodeError:
                continue
            kind = msg.get("type")
            if kind == "offer" and args.role == "answer" and peer.pipeline is None:
                peer.apply_remote(msg["sdp"])
                out({"type": "answer", "sdp": peer.description(), "restart": False})
                peer.start_media()
            elif kind == "answer" and args.role == "offer" and peer.pipeline is None:
                peer.apply_remote(msg["sdp"])
                peer.start_media()
            elif kind == "report":
                out({"type": "report", "iceState": peer.state, "receivedPeakHertz": dominant_hertz(*wav_samples(peer.received))})
            elif kind == "hangup":
                done = True
        if done:
            break
        time.sleep(0.005)
    peer.stop()
    out({"type": "state", "state": "ended", "seconds": round(time.time() - peer.started, 3)})


if __name__ == "__main__":
    main()
