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
int ph_errno(void);
const char *ph_version(void);
