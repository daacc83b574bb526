// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
//
// wiretape's steering program: every frame that arrives on RX queue q is
// redirected to the AF_XDP socket in XSKMAP[q], with 16 bytes of XDP metadata
// just before the frame (struct wt_meta): the kernel's TAI time of arrival
// (ns) and, in the device-bound variant, the NIC's receive time (0 if none).
//
// Two programs share this code:
//   wiretape_steer     any device, native or generic mode
//   wiretape_steer_hw  loaded bound to one device (BPF_F_XDP_DEV_BOUND_ONLY)
//                      so that it may call the metadata kfunc
//                      bpf_xdp_metadata_rx_timestamp (kernel 6.3+; drivers
//                      mlx5, mlx4, igc, ice, veth ...); ENODATA leaves hw = 0.
//
// Counters (per queue, per CPU, summed by user space):
//   seen       frames on a queue that has a socket (redirect was attempted)
//   passed     frames on a queue without a socket (XDP_PASS, not ours)
//   meta_fail  frames whose metadata could not be reserved (stamps = 0)
//   hw         frames that got a NIC timestamp
//   filtered   seen frames the capture filter rejected (left to the stack)
// What happens after the redirect (delivered, ring full, fill ring empty) is
// counted by the kernel per socket and read with getsockopt(XDP_STATISTICS).
//
// Capture filter: after counting a frame as seen and stamping it, the program
// tail-calls filter_prog[0], a program wiretape generates at run time from a
// tcpdump expression (crates/capture/src/xdpfilter.rs: the translated
// classic BPF, then on accept bpf_redirect_map(&xsks, queue, XDP_PASS), on
// reject filtered++ and XDP_PASS). With no filter installed the tail call
// falls through to the redirect below. The metadata is reserved in front of
// ctx->data, so the filter sees the frame from its first byte.
//
// Kept small and verifier-friendly: no loops, every pointer bounds-checked.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define MAX_QUEUES 256

struct qstats {
	__u64 seen;
	__u64 passed;
	__u64 meta_fail;
	__u64 bytes;
	__u64 hw;
	__u64 filtered;
};

// Layout of the metadata area; user space reads it at frame address - 16.
struct wt_meta {
	__u64 hw;
	__u64 tai;
};

extern int bpf_xdp_metadata_rx_timestamp(const struct xdp_md *ctx, __u64 *timestamp) __ksym __weak;

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, MAX_QUEUES);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_QUEUES);
	__type(key, __u32);
	__type(value, struct qstats);
} qstats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} filter_prog SEC(".maps");

static __always_inline int steer(struct xdp_md *ctx, const int want_hw)
{
	__u32 q = ctx->rx_queue_index;
	struct qstats *st = bpf_map_lookup_elem(&qstats, &q);

	if (!st)
		return XDP_PASS;
	// Not one of our queues: leave the frame to the stack, untouched.
	if (!bpf_map_lookup_elem(&xsks, &q)) {
		st->passed++;
		return XDP_PASS;
	}

	// The frame's length through the helper, not `data_end - data`: the
	// verifier allows subtracting two packet pointers only to a loader
	// with CAP_PERFMON (allow_ptr_leaks), and wiretape must load with
	// CAP_BPF + CAP_NET_ADMIN alone. The helper also counts the fragments
	// of a multi-buffer frame.
	__u64 len = bpf_xdp_get_buff_len(ctx);
	__u64 tai = bpf_ktime_get_tai_ns();
	__u64 hw = 0;
	if (want_hw && bpf_ksym_exists(bpf_xdp_metadata_rx_timestamp)) {
		if (bpf_xdp_metadata_rx_timestamp(ctx, &hw) != 0)
			hw = 0;
		else
			st->hw++;
	}
	if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(struct wt_meta)) == 0) {
		void *data = (void *)(long)ctx->data;
		struct wt_meta *meta = (void *)(long)ctx->data_meta;
		if ((void *)(meta + 1) <= data) {
			meta->hw = hw;
			meta->tai = tai;
		} else {
			st->meta_fail++;
		}
	} else {
		st->meta_fail++;
	}
	st->seen++;
	st->bytes += len;
	// The capture filter decides (and redirects) if there is one; without
	// one, this returns and the frame is ours.
	bpf_tail_call(ctx, &filter_prog, 0);
	// The socket can vanish between the lookup and here (shutdown): then the
	// frame is passed on, and counted as seen-but-not-delivered by the kernel
	// stats being unchanged; user space detaches before closing sockets.
	return bpf_redirect_map(&xsks, q, XDP_PASS);
}

SEC("xdp")
int wiretape_steer(struct xdp_md *ctx)
{
	return steer(ctx, 0);
}

SEC("xdp")
int wiretape_steer_hw(struct xdp_md *ctx)
{
	return steer(ctx, 1);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
