#!/usr/bin/env python3
"""aiortc (PyPI) as one side of a call, speaking `tether call`'s JSON-lines protocol.

A second DTLS-SRTP peer besides Chromium: offers or answers with aiortc's RTCPeerConnection,
sends a WAV file as its microphone and keeps the last second it receives. On stdin it takes
the peer's offer/answer lines and the commands `report` and `hangup`; on stdout it prints
offer/answer lines, state lines and report lines (connection and DTLS states, packets, the
dominant frequency of the last second received). aiortc does no ICE restart and no SDES.
"""
import argparse, array, asyncio, collections, json, sys, time

from aiortc import RTCPeerConnection, RTCSessionDescription
from aiortc.contrib.media import MediaPlayer
from tones import dominant_hertz


def out(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("--role", choices=["offer", "answer"], required=True)
    p.add_argument("--audio", required=True, help="WAV file to send (looped)")
    args = p.parse_args()

    pc = RTCPeerConnection()
    player = MediaPlayer(args.audio, loop=True)
    pc.addTrack(player.audio)
    started = time.time()
    heard = collections.deque(maxlen=48000)  # the last second received, first channel
    rate = [48000]

    async def listen(track):
        while True:
            try:
                frame = await track.recv()
            except Exception:
                return
            rate[0] = frame.sample_rate
            pcm = array.array("h", bytes(frame.planes[0]))
            heard.extend(pcm[::len(frame.layout.channels)])

    @pc.on("track")
    def on_track(track):
        asyncio.ensure_future(listen(track))

    @pc.on("connectionstatechange")
    async def on_state():
        out({"type": "state", "state": pc.connectionState, "seconds": round(time.time() - started, 3)})

    if args.role == "offer":
        await pc.setLocalDescription(await pc.createOffer())
        out({"type": "offer", "sdp": pc.localDescription.sdp, "restart": False})

    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while True:
        line = (await reader.readline()).decode()
        if not line:
            break
        line = line.strip()
        try:
            msg = json.loads(line) if line.startswith("{") else {"type": line}
        except json.JSONDecodeError:
            continue
        kind = msg.get("type")
        if kind == "offer" and not msg.get("restart"):
            await pc.setRemoteDescription(RTCSessionDescription(msg["sdp"], "offer"))
            await pc.setLocalDescription(await pc.createAnswer())
            out({"type": "answer", "sdp": pc.localDescription.sdp, "restart": False})
        elif kind == "answer" and not msg.get("restart"):
            await pc.setRemoteDescription(RTCSessionDescription(msg["sdp"], "answer"))
        elif kind == "report":
            dtls = None
            for transceiver in pc.getTransceivers():
                dtls = transceiver.sender.transport
            stats = await pc.getStats()
            inbound = next((s for s in stats.values() if s.type == "inbound-rtp"), None)
            out({"type": "report", "connectionState": pc.connectionState,
                 "dtlsState": dtls.state if dtls else None,
                 "packetsReceived": inbound.packetsReceived if inbound else 0,
                 # In a thread, so the event loop keeps the media flowing meanwhile.
                 "receivedPeakHertz": await loop.run_in_executor(None, dominant_hertz, list(heard), rate[0])})
        elif kind == "hangup":
            await pc.close()
            out({"type": "state", "state": "ended", "seconds": round(time.time() - started, 3)})
            break


asyncio.run(main())
