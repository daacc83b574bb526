#!/usr/bin/env python3
"""Folds `perf script` output (perf record -a -g) into per-frame CPU by component.

    kernel_profile.py FREQ FRAMES NAME < perf-script.txt  -> one JSON line

Each sample is one 1/FREQ s tick of one CPU. It is charged to the first
component whose pattern matches a frame of its stack, looking from the leaf
towards the root (so memcpy under __xsk_rcv is the AF_XDP copy, a wake-up
under tpacket_rcv is a wake-up). Idle samples are dropped; samples in user
space are charged to the generator or to the tool by command name. The
rig's own counting of the files after a trial (pcapcount, capinfos) is not
the tool's and is dropped, as is the rig's memory warming (python3).
"""
import json
import re
import sys

COMPONENTS = [
    # A packet ring's memory zeroed when a tool sets it up (start-up, not per
    # frame; the script warms kernel memory first, as compare.sh does).
    ("ring_setup", r"^(packet_set_ring|alloc_pg_vec|free_pg_vec)"),
    ("xdp_program", r"^bpf_prog_"),
    ("afxdp_copy_and_rings", r"^(__xsk_rcv|xsk_rcv|xsk_buff_|__xsk_map_redirect|xsk_flush|xsk_generic_rcv|xp_|xsk_)"),
    ("veth_skb_to_xdp_copy", r"^(skb_pp_cow_data|veth_convert_skb_to_xdp_buff|skb_cow_data_for_xdp)"),
    ("page_pool", r"^page_pool_"),
    ("xdp_redirect", r"^(xdp_do_redirect|xdp_do_flush|__xdp_do_redirect|dev_map_|bq_|xdp_master_redirect)"),
    ("veth_xdp_receive_rest", r"^(veth_xdp_rcv|veth_poll|veth_xdp_rcv_skb|veth_xdp_rcv_one)"),
    ("af_packet_ring_copy", r"^(tpacket_rcv|packet_rcv|prb_|packet_rcv_fanout|fanout_demux|__packet_rcv_has_room|run_filter)"),
    ("sleep_wake_poll", r"^(schedule|__schedule|try_to_wake_up|__wake_up|hrtimer_|do_nanosleep|futex_|ep_poll|do_sys_poll|do_poll|do_select|finish_task_switch|sock_def_readable|ttwu_|__x64_sys_ppoll|__x64_sys_clock_nanosleep|tick_|schedule_hrtimeout)"),
    ("disk_io", r"^(io_uring|io_|blk_|bio_|__bio|iomap_|ext4_|virtio_queue_rq|virtblk_|nvme_|submit_bio|dio_|aio_|__blkdev|vfs_write|ksys_write|__x64_sys_pwrite|__x64_sys_write|filemap_|generic_perform_write)"),
    ("stack_receive_napi", r"^(__netif_receive_skb|netif_receive_skb|process_backlog|net_rx_action|napi_|__napi|enqueue_to_backlog|netif_rx|__netif_rx|gro_|dev_gro_receive|skb_defer|kfree_skb|sk_skb_reason_drop|__kfree_skb|consume_skb|ip_rcv|ip_list_rcv)"),
    ("generator_send_path", r"^(packet_snd|tpacket_snd|packet_sendmsg|__dev_queue_xmit|dev_queue_xmit|veth_xmit|sch_direct_xmit|dev_hard_start_xmit|packet_direct_xmit|__sys_sendto|__x64_sys_sendto)"),
]
IDLE = re.compile(r"^(cpuidle_|default_idle|intel_idle|poll_idle|acpi_idle|mwait_idle|do_idle|cpu_startup_entry|native_safe_halt|pv_native_safe_halt|arch_cpu_idle|default_idle_call)")
RIG_COMMS = ("pcapcount", "capinfos", "python3")
PATS = [(n, re.compile(p)) for n, p in COMPONENTS]
HEAD = re.compile(r"^(\S.*?)\s+(\d+)(?:/\d+)?\s+\[(\d+)\]")


def classify(comm, stack):
    """stack: [(sym, dso)] leaf first."""
    if not stack or comm.startswith(RIG_COMMS):
        return None
    for sym, _ in stack:
        if IDLE.match(sym):
            return None
    leaf_dso = stack[0][1]
    if "kernel" not in leaf_dso and not leaf_dso.startswith("[bpf") and not stack[0][0].startswith("bpf_prog_"):
        return "user_generator" if comm.startswith("trafgen") else "user_tool"
    for sym, _ in stack:
        for name, pat in PATS:
            if pat.match(sym):
                return name
    return "other_kernel"


def main():
    freq, frames, name = float(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    counts = {}
    comm, stack = None, []

    def flush():
        if comm is not None:
            c = classify(comm, stack)
            if c:
                counts[c] = counts.get(c, 0) + 1

    for line in sys.stdin:
        if not line.strip():
            flush()
            comm, stack = None, []
            continue
        if not line.startswith((" ", "\t")):
            flush()
            m = HEAD.match(line)
            comm, stack = (m.group(1).strip() if m else line.split()[0]), []
            continue
        parts = line.strip().split(None, 1)
        if len(parts) < 2:
            continue
        rest = parts[1]
        m = re.match(r"(.*?)\s+\((.*)\)$", rest)
        sym, dso = (m.group(1), m.group(2)) if m else (rest, "")
        sym = re.sub(r"\+0x[0-9a-f]+$", "", sym)
        stack.append((sym, dso))
    flush()
    per_frame_us = {k: v / freq / frames * 1e6 for k, v in counts.items()}
    print(json.dumps({"tool": name, "frames": frames, "samples": counts, "us_per_frame": per_frame_us}))


if __name__ == "__main__":
    main()
