#include "wrapper.h"

uint16_t ph_rx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n)
{
	return rte_eth_rx_burst(port, queue, pkts, n);
}

uint16_t ph_tx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n)
{
	return rte_eth_tx_burst(port, queue, pkts, n);
}

struct rte_mbuf *ph_pktmbuf_alloc(struct rte_mempool *mp)
{
	return rte_pktmbuf_alloc(mp);
}

int ph_pktmbuf_alloc_bulk(struct rte_mempool *mp, struct rte_mbuf **mbufs, unsigned int count)
{
	return rte_pktmbuf_alloc_bulk(mp, mbufs, count);
}

void ph_pktmbuf_free(struct rte_mbuf *m)
{
	rte_pktmbuf_free(m);
}

uint8_t *ph_pktmbuf_data(struct rte_mbuf *m)
{
	return rte_pktmbuf_mtod(m, uint8_t *);
}

uint16_t ph_pktmbuf_data_len(const struct rte_mbuf *m)
{
	return rte_pktmbuf_data_len(m);
}

uint16_t ph_pktmbuf_capacity(const struct rte_mbuf *m)
{
	return (uint16_t)(m->buf_len - m->data_off);
}

int ph_pktmbuf_set_len(struct rte_mbuf *m, uint16_t len)
{
	if (len > ph_pktmbuf_capacity(m))
		return -1;
	m->data_len = len;
	m->pkt_len = len;
	return 0;
}

uint16_t ph_pktmbuf_nb_segs(const struct rte_mbuf *m)
{
	return m->nb_segs;
}

uint64_t ph_pktmbuf_ol_flags(const struct rte_mbuf *m)
{
	return m->ol_flags;
}

int ph_errno(void)
{
	return rte_errno;
}

const char *ph_version(void)
{
	return rte_version();
}
