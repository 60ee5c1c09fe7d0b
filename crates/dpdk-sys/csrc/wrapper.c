#include "wrapper.h"

#include <rte_memory.h>

#include <string.h>

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

static const struct {
	uint32_t ph;
	uint64_t rte;
} tx_offloads[] = {
	{ PH_TX_IPV4_CKSUM, RTE_ETH_TX_OFFLOAD_IPV4_CKSUM },
	{ PH_TX_TCP_CKSUM, RTE_ETH_TX_OFFLOAD_TCP_CKSUM },
	{ PH_TX_UDP_CKSUM, RTE_ETH_TX_OFFLOAD_UDP_CKSUM },
	{ PH_TX_TCP_TSO, RTE_ETH_TX_OFFLOAD_TCP_TSO },
};

uint32_t ph_eth_tx_offload_capa(uint16_t port)
{
	struct rte_eth_dev_info info;
	uint32_t capa = 0;
	unsigned int i;

	if (rte_eth_dev_info_get(port, &info) != 0)
		return 0;
	for (i = 0; i < RTE_DIM(tx_offloads); i++)
		if (info.tx_offload_capa & tx_offloads[i].rte)
			capa |= tx_offloads[i].ph;
	return capa;
}

int ph_eth_configure(uint16_t port, uint32_t tx_offloads_wanted)
{
	struct rte_eth_conf conf;
	unsigned int i;

	memset(&conf, 0, sizeof(conf));
	for (i = 0; i < RTE_DIM(tx_offloads); i++)
		if (tx_offloads_wanted & tx_offloads[i].ph)
			conf.txmode.offloads |= tx_offloads[i].rte;
	return rte_eth_dev_configure(port, 1, 1, &conf);
}

static const struct {
	uint32_t ph;
	uint64_t rte;
} tx_requests[] = {
	{ PH_REQ_IPV4, RTE_MBUF_F_TX_IPV4 },
	{ PH_REQ_IPV6, RTE_MBUF_F_TX_IPV6 },
	{ PH_REQ_IP_CKSUM, RTE_MBUF_F_TX_IP_CKSUM },
	{ PH_REQ_TCP_CKSUM, RTE_MBUF_F_TX_TCP_CKSUM },
	{ PH_REQ_UDP_CKSUM, RTE_MBUF_F_TX_UDP_CKSUM },
	{ PH_REQ_TCP_SEG, RTE_MBUF_F_TX_TCP_SEG },
};

void ph_pktmbuf_request_tx(struct rte_mbuf *m, uint32_t request, uint16_t l2_len, uint16_t l3_len,
			   uint16_t l4_len, uint16_t tso_segsz)
{
	uint64_t flags = 0;
	unsigned int i;

	for (i = 0; i < RTE_DIM(tx_requests); i++)
		if (request & tx_requests[i].ph)
			flags |= tx_requests[i].rte;
	m->ol_flags = (m->ol_flags & ~RTE_MBUF_F_TX_OFFLOAD_MASK) | flags;
	m->l2_len = l2_len;
	m->l3_len = l3_len;
	m->l4_len = l4_len;
	m->tso_segsz = tso_segsz;
}

uint16_t ph_tx_prepare(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n)
{
	return rte_eth_tx_prepare(port, queue, pkts, n);
}

int ph_errno(void)
{
	return rte_errno;
}

const char *ph_version(void)
{
	return rte_version();
}

struct memseg_arrays {
	void **addr;
	size_t *elements_len;
	int max;
	int n;
};

static int collect_memseg_array(const struct rte_memseg_list *msl, void *arg)
{
	struct memseg_arrays *a = arg;

	if (a->n < a->max && msl->memseg_arr.data != NULL) {
		a->addr[a->n] = msl->memseg_arr.data;
		a->elements_len[a->n] = (size_t)msl->memseg_arr.elt_sz * msl->memseg_arr.len;
		a->n++;
	}
	return 0;
}

int ph_memseg_arrays(void **addr, size_t *elements_len, int max)
{
	struct memseg_arrays a = { addr, elements_len, max, 0 };

	rte_memseg_list_walk(collect_memseg_array, &a);
	return a.n;
}
