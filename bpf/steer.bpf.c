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
//   cutoff     seen frames the filter kept and the cutoff dropped
//   cutoff_bytes  their bytes
//   cutoff_inserts  connections the cutoff added to its table (evictions are
//              these minus the entries present at the end, counted by user
//              space: the kernel's LRU does not report what it evicts)
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
// Per-connection cutoff (`record --cutoff SIZE`): wiretape_cutoff below,
// in filter_prog[1] when the cutoff is on (empty otherwise). The steering
// program tail-calls it when no filter is installed; with a filter, the
// filter's accept path tail-calls it (so the filter runs first and the
// cutoff counts only frames it keeps). It applies the rule of
// crates/capture/src/cutoff.rs and either drops the frame (counted in
// cutoff / cutoff_bytes) or redirects it. If a tail call fails, the caller
// falls through to the redirect: the frame is kept.
//
// Kept small and verifier-friendly: bounded loops, every pointer
// bounds-checked.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define MAX_QUEUES 256

struct qstats {
	__u64 seen;
	__u64 passed;
	__u64 meta_fail;
	__u64 bytes;
	__u64 hw;
	__u64 filtered;
	__u64 cutoff;
	__u64 cutoff_bytes;
	__u64 cutoff_inserts;
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
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u32);
} filter_prog SEC(".maps");

// A connection of the cutoff (crates/capture/src/cutoff.rs, `Key`): the
// addresses and ports in a fixed order (lower first, as big-endian words),
// so that both directions share one entry. Zeroed in full before use.
struct cutoff_key {
	__u32 lo[4];
	__u32 hi[4];
	__u16 port_lo;
	__u16 port_hi;
	__u8 version;
	__u8 proto;
	__u8 pad[2];
};

// The cutoff's table: one shared (not per-CPU) LRU, so every queue and both
// directions add to one count. max_entries is --cutoff-flows, set by user
// space before load (1 when the cutoff is off).
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1);
	__type(key, struct cutoff_key);
	__type(value, __u64);
} cutoff_flows SEC(".maps");

// cutoff_size[0]: SIZE in bytes (set by user space after load).
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} cutoff_size SEC(".maps");

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
	// No filter: the cutoff decides (and redirects) if it is on.
	bpf_tail_call(ctx, &filter_prog, 1);
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

// Reads 16 bits at data + off (network order), or returns -1 when they are
// past the end.
#define LOAD16(var, off)                                                   \
	do {                                                               \
		__u8 *p_ = data + ((off) & 0x3ff);                         \
		if ((void *)(p_ + 2) > data_end)                           \
			goto keep;                                         \
		var = ((__u16)p_[0] << 8) | p_[1];                         \
	} while (0)

static __always_inline int lt16(const __u32 *a, const __u32 *b)
{
	for (int i = 0; i < 4; i++) {
		if (a[i] != b[i])
			return a[i] < b[i];
	}
	return 0;
}

// The cutoff (see the top of this file and crates/capture/src/cutoff.rs):
// frames exempt from the rule and frames too short to tell are kept and not
// counted; TCP with SYN, FIN or RST is kept and counted; any other frame is
// kept when its connection's count before it is below SIZE.
SEC("xdp")
int wiretape_cutoff(struct xdp_md *ctx)
{
	__u32 q = ctx->rx_queue_index;
	__u32 zero = 0;
	__u8 *data = (void *)(long)ctx->data;
	__u8 *data_end = (void *)(long)ctx->data_end;
	struct cutoff_key key = {};
	__u32 off = 14, l4 = 0, have_l4 = 0;
	__u16 et, p1 = 0, p2 = 0;
	__u8 proto, flags = 0;

	LOAD16(et, 12);
	for (int i = 0; i < 2; i++) {
		if (et != ETH_P_8021Q && et != ETH_P_8021AD)
			break;
		LOAD16(et, off + 2);
		off += 4;
	}
	if (et == ETH_P_IP) {
		__u8 *ip = data + (off & 0x3ff);
		if ((void *)(ip + 20) > (void *)data_end || ip[0] >> 4 != 4)
			goto keep;
		// A non-first fragment: kept, never counted.
		if ((((__u16)ip[6] << 8 | ip[7]) & 0x1fff) != 0)
			goto keep;
		__u32 ihl = (ip[0] & 0x0f) * 4;
		if (ihl < 20)
			ihl = 20;
		key.version = 4;
		__builtin_memcpy(&key.lo[0], ip + 12, 4);
		__builtin_memcpy(&key.hi[0], ip + 16, 4);
		key.lo[0] = bpf_ntohl(key.lo[0]);
		key.hi[0] = bpf_ntohl(key.hi[0]);
		proto = ip[9];
		l4 = off + ihl;
		have_l4 = 1;
	} else if (et == ETH_P_IPV6) {
		__u8 *ip = data + (off & 0x3ff);
		if ((void *)(ip + 40) > (void *)data_end || ip[0] >> 4 != 6)
			goto keep;
		key.version = 6;
		for (int i = 0; i < 4; i++) {
			__u32 a, b;
			__builtin_memcpy(&a, ip + 8 + 4 * i, 4);
			__builtin_memcpy(&b, ip + 24 + 4 * i, 4);
			key.lo[i] = bpf_ntohl(a);
			key.hi[i] = bpf_ntohl(b);
		}
		proto = ip[6];
		__u32 eh = off + 40;
		have_l4 = 1;
		// Up to 8 extension headers (hop-by-hop, routing, fragment,
		// destination options), as cutoff.rs reads them.
		for (int i = 0; i < 8; i++) {
			// Past 4 kB is past the end of any frame XDP sees whole.
			if (eh > 0xfff) {
				have_l4 = 0;
				break;
			}
			__u8 *h = data + (eh & 0xfff);
			if (proto == 0 || proto == 43 || proto == 60) {
				if ((void *)(h + 2) > (void *)data_end) {
					have_l4 = 0;
					break;
				}
				proto = h[0];
				eh += ((__u32)h[1] + 1) * 8;
			} else if (proto == 44) {
				if ((void *)(h + 4) > (void *)data_end) {
					have_l4 = 0;
					break;
				}
				if ((((__u16)h[2] << 8 | h[3]) >> 3) != 0)
					goto keep;
				proto = h[0];
				eh += 8;
			} else {
				break;
			}
		}
		l4 = eh;
	} else {
		goto keep;
	}
	if (have_l4 && l4 <= 0xfff && (proto == 6 || proto == 17 || proto == 132)) {
		__u8 *p = data + (l4 & 0xfff);
		if ((void *)(p + 4) <= (void *)data_end) {
			p1 = (__u16)p[0] << 8 | p[1];
			p2 = (__u16)p[2] << 8 | p[3];
		}
		if (proto == 6 && (void *)(p + 14) <= (void *)data_end)
			flags = p[13] & 0x07;
	}
	key.proto = proto;
	key.port_lo = p1 < p2 ? p1 : p2;
	key.port_hi = p1 < p2 ? p2 : p1;
	if (lt16(key.hi, key.lo)) {
		for (int i = 0; i < 4; i++) {
			__u32 t = key.lo[i];
			key.lo[i] = key.hi[i];
			key.hi[i] = t;
		}
	}

	__u64 *size = bpf_map_lookup_elem(&cutoff_size, &zero);
	struct qstats *st = bpf_map_lookup_elem(&qstats, &q);
	if (!size || !st)
		goto keep;
	__u64 len = bpf_xdp_get_buff_len(ctx);
	__u64 before;
	__u64 *count = bpf_map_lookup_elem(&cutoff_flows, &key);
	if (!count) {
		if (bpf_map_update_elem(&cutoff_flows, &key, &len, BPF_NOEXIST) == 0) {
			st->cutoff_inserts++;
			goto keep;
		}
		// Another CPU added it meanwhile.
		count = bpf_map_lookup_elem(&cutoff_flows, &key);
		if (!count)
			goto keep;
	}
	before = __sync_fetch_and_add(count, len);
	if (flags || before < *size)
		goto keep;
	st->cutoff++;
	st->cutoff_bytes += len;
	return XDP_DROP;
keep:
	return bpf_redirect_map(&xsks, q, XDP_PASS);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
