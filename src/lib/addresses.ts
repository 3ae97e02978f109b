// Which IP addresses are public: the one test for every place the platform connects to an address a workspace or
// a graph chose (run webhooks, OAuth providers), so that none of them reaches the host, the cluster or a cloud's
// metadata service. Everything that is not global unicast is internal, in every spelling of it.
import ipaddr from 'ipaddr.js';

const IPV4_COMPATIBLE = ipaddr.IPv6.parse('::');

/**
 * Whether `address` (a literal IPv4 or IPv6 address, no brackets) is a public unicast one. IPv4 in IPv6 is judged
 * as the IPv4 address it carries where it can reach it: IPv4-mapped (::ffff:a.b.c.d) by that address, and the
 * deprecated IPv4-compatible form (::a.b.c.d, which the URL parser writes as ::7f00:1) never public. NAT64,
 * 6to4, Teredo and the other special ranges are not unicast for ipaddr.js and so refused.
 */
export function isPublicAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  const parsed = ipaddr.parse(address);
  if (parsed.kind() === 'ipv4') return parsed.range() === 'unicast';
  const v6 = parsed as ipaddr.IPv6;
  if (v6.isIPv4MappedAddress()) return v6.toIPv4Address().range() === 'unicast';
  if (v6.match(IPV4_COMPATIBLE, 96)) return false;
  return v6.range() === 'unicast';
}
