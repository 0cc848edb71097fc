# SPDX-License-Identifier: MIT
"""Streams from Python: with a C member both ways, with asyncio, selectors and io wrappers."""

import asyncio
import io
import os
import selectors
import unittest

import orbit
import orbit.aio
from support import WAIT_S, FleetCase


class TestWithC(FleetCase):
    tag = "cstr"

    def test_python_offers_a_stream_the_c_member_echoes(self):
        f = self.join()
        streams = f.streams()
        peer = self.c_peer("echo")
        node = int(peer.line("node").split()[1])
        ep, ticket = streams.create()
        self.assertEqual((ticket.side, ticket.id.node), ("b", f.node))
        streams.offer(ticket, node)
        body = os.urandom(300_000)   # several rings each way
        sent = received = 0
        chunks = []
        while received < len(body):  # write what fits, read what came back: no deadlock on full rings
            if sent < len(body):
                n = ep.try_write(memoryview(body)[sent:sent + 65536])
                sent += n or 0
            got = ep.read(65536, timeout=WAIT_S) if n is None or sent == len(body) else ep.try_read(65536)
            if got:
                chunks.append(got)
                received += len(got)
        ep.finish()
        self.assertEqual(b"".join(chunks), body)
        self.assertEqual(ep.read(16, timeout=WAIT_S), b"")   # the C side's FIN
        self.assertEqual(ep.peer()[0], node)
        ep.close()
        self.assertEqual(peer.line("echoed"), "echoed %d" % len(body))
        self.assertEqual(peer.wait(), 0)

    def test_the_c_member_offers_a_stream_python_answers(self):
        f = self.join()
        streams = f.streams()
        peer = self.c_peer("offer", f.node)
        text = peer.line("ticket").split()[1]
        ticket = streams.wait_offer(timeout=WAIT_S)
        self.assertEqual(str(ticket), text)          # the same text in C and Python
        with streams.open(text) as ep:
            reader = io.BufferedReader(ep)           # an io.RawIOBase: the io wrappers work
            lines = reader.read().decode().splitlines()
            reader.detach()                          # (closing the wrapper would close ep)
            self.assertEqual(lines, ["from C"] * 1000)
            ep.write_all(b"thanks from Python", timeout=WAIT_S)
            ep.finish()
            self.assertEqual(peer.line("answer"), "answer thanks from Python")
        self.assertEqual(peer.wait(), 0)


class TestPython(FleetCase):
    tag = "pstr"

    def test_asyncio_member_echoes_with_no_thread(self):
        f = self.join()
        streams = f.streams(kind=201, buffer_bytes=4096)   # small rings: many waits each way
        echo = self.worker("echo", 201, 4096)
        node = int(echo.line("node").split()[1])
        body = os.urandom(200_000)

        async def run():
            ep, ticket = streams.create()
            streams.offer(ticket, node)

            async def send():
                await ep.write_async(body, timeout=WAIT_S)
                ep.finish()
            sender = asyncio.get_running_loop().create_task(send())
            got = bytearray()
            while True:
                chunk = await ep.read_async(8192, timeout=WAIT_S)
                if not chunk:
                    break
                got += chunk
            await sender
            ep.close()
            return bytes(got)
        self.assertEqual(asyncio.run(run()), body)
        self.assertEqual(echo.line("echoed"), "echoed %d" % len(body))
        self.assertEqual(echo.wait(), 0)

    def test_selectors_see_the_readiness_descriptor(self):
        f = self.join()
        streams = f.streams()
        a, ticket = streams.create()
        b = streams.open(ticket)
        with selectors.DefaultSelector() as sel:
            sel.register(b, selectors.EVENT_READ)     # Endpoint.fileno(): the table's descriptor
            self.assertIsNone(b.try_read(10))         # nothing yet: now b's changes ring the descriptor
            self.assertEqual(sel.select(0), [])
            a.write(b"ping")
            self.assertEqual(len(sel.select(WAIT_S)), 1)
            streams.drain_readiness()
            self.assertEqual(b.try_read(10), b"ping")
            self.assertEqual(sel.select(0), [])
        a.close()
        with self.assertRaises(orbit.ResetError):      # closing an unfinished writer resets
            b.read(10, timeout=1)
        with self.assertRaises(orbit.PeerGoneError):
            b.write(b"x", timeout=1)

    def test_frames_fin_and_errors(self):
        f = self.join()
        streams = f.streams(kind=200, buffer_bytes=1024)
        a, ticket = streams.create()
        b = streams.open(ticket)
        with self.assertRaises(orbit.ClaimedError):
            streams.open(ticket)
        a.write_exact(b"x" * 1000)
        with self.assertRaises(orbit.TimedOutError):
            a.write_exact(b"y" * 100, timeout=0.05)   # no room for the whole frame
        with self.assertRaises(orbit.TooLargeError):
            a.write_exact(b"z" * 2000)
        self.assertEqual(b.read_exact(1000), b"x" * 1000)
        buf = bytearray(8)
        a.write(b"abc")
        self.assertEqual(b.readinto(buf), 3)
        self.assertEqual(bytes(buf[:3]), b"abc")
        a.finish()
        with self.assertRaises(orbit.ClosedError):
            a.write(b"late")
        self.assertEqual(b.read(), b"")
        b.stop_reading()
        b.close()
        a.close()
        self.assertEqual(streams.list(), [])


if __name__ == "__main__":
    unittest.main()
