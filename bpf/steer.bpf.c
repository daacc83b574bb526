// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
//
// wiretape's steering program: every frame that arrives on RX queue q is
// redirected to the AF_XDP socket in XSKMAP[q], with the kernel's TAI time of
// arrival (ns) written into the 8 bytes of XDP metadata just before the frame.
//
// Counters (per queue, per CPU, summed by user space):
//   seen       frames on a queue that has a socket (redirect was attempted)
//   passed     frames on a queue without a socket (XDP_PASS, not ours)
//   meta_fail  frames whose metadata could not be reserved (stamp = 0)
// What happens after the redirect (delivered, ring full, fill ring empty) is
// counted by the kernel per socket and read with getsockopt(XDP_STATISTICS).
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
};

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

SEC("xdp")
int wiretape_steer(struct xdp_md *ctx)
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

	__u64 len = ctx->data_end - ctx->data;
	if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(__u64)) == 0) {
		void *data = (void *)(long)ctx->data;
		__u64 *meta = (void *)(long)ctx->data_meta;
		if ((void *)(meta + 1) <= data)
			*meta = bpf_ktime_get_tai_ns();
		else
			st->meta_fail++;
	} else {
		st->meta_fail++;
	}
	st->seen++;
	st->bytes += len;
	// The socket can vanish between the lookup and here (shutdown): then the
	// frame is passed on, and counted as seen-but-not-delivered by the kernel
	// stats being unchanged; user space detaches before closing sockets.
	return bpf_redirect_map(&xsks, q, XDP_PASS);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
