/* The DPDK API pronghorn binds, plus wrappers for the static-inline fast-path functions that
 * bindgen cannot link to. */
#include <rte_config.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_version.h>

uint16_t ph_rx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n);
uint16_t ph_tx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n);
struct rte_mbuf *ph_pktmbuf_alloc(struct rte_mempool *mp);
int ph_pktmbuf_alloc_bulk(struct rte_mempool *mp, struct rte_mbuf **mbufs, unsigned int count);
void ph_pktmbuf_free(struct rte_mbuf *m);
uint8_t *ph_pktmbuf_data(struct rte_mbuf *m);
uint16_t ph_pktmbuf_data_len(const struct rte_mbuf *m);
/* Room for frame bytes from the data start to the end of the buffer. */
uint16_t ph_pktmbuf_capacity(const struct rte_mbuf *m);
/* Sets data_len and pkt_len of a single-segment mbuf; returns -1 when len exceeds capacity. */
int ph_pktmbuf_set_len(struct rte_mbuf *m, uint16_t len);
uint16_t ph_pktmbuf_nb_segs(const struct rte_mbuf *m);
uint64_t ph_pktmbuf_ol_flags(const struct rte_mbuf *m);
/* Offloads as pronghorn names them (bits of a uint32_t), mapped to DPDK's 64-bit flags here: the
 * RTE_ETH_TX_OFFLOAD_* and RTE_MBUF_F_TX_* values are RTE_BIT64() macros that bindgen cannot
 * evaluate. */
enum ph_tx_offload {
	PH_TX_IPV4_CKSUM = 1,
	PH_TX_TCP_CKSUM = 2,
	PH_TX_UDP_CKSUM = 4,
	PH_TX_TCP_TSO = 8,
};
/* The tx offloads of ph_tx_offload the port offers (rte_eth_dev_info's tx_offload_capa). */
uint32_t ph_eth_tx_offload_capa(uint16_t port);
/* rte_eth_dev_configure with one rx and one tx queue and the tx offloads `tx_offloads`
 * (ph_tx_offload bits) enabled. */
int ph_eth_configure(uint16_t port, uint32_t tx_offloads);
/* What one frame asks of the NIC (bits of a uint32_t). */
enum ph_tx_request {
	PH_REQ_IPV4 = 1,
	PH_REQ_IPV6 = 2,
	PH_REQ_IP_CKSUM = 4,
	PH_REQ_TCP_CKSUM = 8,
	PH_REQ_UDP_CKSUM = 16,
	PH_REQ_TCP_SEG = 32,
};
/* Sets the mbuf's tx ol_flags from `request` (ph_tx_request bits) and its header lengths and
 * TSO segment size, as the PMD reads them. */
void ph_pktmbuf_request_tx(struct rte_mbuf *m, uint32_t request, uint16_t l2_len, uint16_t l3_len,
			   uint16_t l4_len, uint16_t tso_segsz);
uint16_t ph_tx_prepare(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n);
int ph_errno(void);
const char *ph_version(void);
/* The element arrays of the EAL's memseg lists (each list's rte_fbarray data: the segments'
 * descriptors and the used-mask): up to `max` of them, each one's address and the bytes its
 * elements take (the mask and the page rounding come on top). Returns how many. */
int ph_memseg_arrays(void **addr, size_t *elements_len, int max);
