#!/usr/bin/env python3
"""Warms kernel memory before a rig trial (benches/compare.sh, kernel_profile.sh).

On this VM, memory the host took back while the machine idled costs a guest
~20x more to zero again. A packet ring is such memory (unmovable, zeroed when
a socket sets PACKET_RX_RING): 256 MiB took 0.56 s of the tool's own system
time when cold against 0.05 s warm (wiretape and stenotype alike), so
whichever tool ran after an idle pause paid ~0.5 s more. This sets up a ring
of 320 MiB (more than any tool asks for) and frees it, outside the tool; the
tool's ring then comes from memory just freed. Measured: 56-59 ticks of
start-up after 15 s idle, 5-6 after this (benches/results/inplace-2026-11-25.md).
"""
import socket
import struct

s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
s.setsockopt(263, 10, 2)  # SOL_PACKET, PACKET_VERSION, TPACKET_V3
n = 320
# PACKET_RX_RING: blocks of 1 MiB, 2 KiB frames, retire 10 ms.
s.setsockopt(263, 5, struct.pack("7I", 1 << 20, n, 2048, (1 << 20) // 2048 * n, 10, 0, 0))
s.close()
