package calico

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/big"
	"math/bits"
	"net/netip"
	"strings"

	"github.com/google/uuid"
)

// maxNameLen is the longest object name Calico writes for a BlockAffinity before it truncates
// the node part and appends a hash (libcalico-go resources/ipam_affinity_v1.go).
const maxNameLen = 253

// BlockName is the IPAMBlock object name for a block CIDR: the CIDR with '.', ':' and '/'
// turned into '-', e.g. "172-24-10-64-26" for 172.24.10.64/26 (libcalico-go names/cidr.go).
func BlockName(cidr netip.Prefix) string {
	return cidrName(cidr.Masked().String())
}

func cidrName(s string) string { return cidrDashes.Replace(s) }

var cidrDashes = strings.NewReplacer(".", "-", ":", "-", "/", "-") // built once, safe for concurrent use

// AffinityName is the BlockAffinity object name for node and block CIDR: "<node>-<block name>",
// e.g. "worker-1-172-24-10-64-26". When that would be 253 characters or more, the node part is
// truncated and "-<first 11 hex digits of sha256(node+"+"+block name)>" appended, as Calico does.
func AffinityName(node string, cidr netip.Prefix) string {
	bn := BlockName(cidr)
	name := node + "-" + bn
	if len(name) < maxNameLen {
		return name
	}
	sum := sha256.Sum256([]byte(node + "+" + bn))
	suffix := "-" + hex.EncodeToString(sum[:])[:11]
	// Calico keeps 252-len(block name)-13 characters of the node name, so the result is 252
	// characters long.
	keep := max(maxNameLen-1-len(bn)-13, 0)
	return node[:min(keep, len(node))] + "-" + bn + suffix
}

// HandleName is the IPAMHandle object name for a handle ID: the ID in lower case.
func HandleName(handleID string) string { return strings.ToLower(handleID) }

// ConvertUID is Calico's deterministic UID conversion for crd.projectcalico.org/v1 objects
// (libcalico-go k8s/conversion ConvertUID): the bits of every byte of the UUID are reversed,
// except bytes 6 and 8, which carry the UUID version and variant. Calico clients (and so the
// leakedHandles[].UID of a calicoctl report) see this converted value, not metadata.uid. The
// conversion is its own inverse.
func ConvertUID(uid string) (string, error) {
	u, err := uuid.Parse(uid)
	if err != nil {
		return "", fmt.Errorf("parse uid %q: %w", uid, err)
	}
	for i := range u {
		if i == 6 || i == 8 {
			continue
		}
		u[i] = bits.Reverse8(u[i])
	}
	return u.String(), nil
}

// blockSize is the number of addresses in a block CIDR, or 0 for a prefix wider than 2^30
// addresses (Calico blocks are /20 to /32 in IPv4 and /116 to /128 in IPv6).
func blockSize(cidr netip.Prefix) int {
	host := cidr.Addr().BitLen() - cidr.Bits()
	if host > 30 || host < 0 {
		return 0
	}
	return 1 << host
}

// prefixSize is the number of addresses in any prefix, as a float64 (pool sizes can exceed int).
func prefixSize(p netip.Prefix) float64 {
	host := p.Addr().BitLen() - p.Bits()
	f, _ := new(big.Float).SetInt(new(big.Int).Lsh(big.NewInt(1), uint(host))).Float64()
	return f
}

// ordinalIP is the address at ordinal ord of block cidr (base address plus ord).
func ordinalIP(cidr netip.Prefix, ord int) netip.Addr {
	base := cidr.Masked().Addr()
	b := base.As16()
	carry := uint64(ord)
	for i := 15; i >= 0 && carry > 0; i-- {
		sum := uint64(b[i]) + (carry & 0xff)
		b[i] = byte(sum)
		carry = (carry >> 8) + (sum >> 8)
	}
	a := netip.AddrFrom16(b)
	if base.Is4() {
		return a.Unmap()
	}
	return a
}

// ipOrdinal is the ordinal of ip within block cidr, or -1 when ip is outside the block.
func ipOrdinal(cidr netip.Prefix, ip netip.Addr) int {
	cidr = cidr.Masked()
	if !cidr.Contains(ip) {
		return -1
	}
	a, b := ip.As16(), cidr.Addr().As16()
	// The host part is at most 30 bits wide, so the low 4 bytes hold the whole difference.
	var x, y uint32
	for i := 12; i < 16; i++ {
		x = x<<8 | uint32(a[i])
		y = y<<8 | uint32(b[i])
	}
	return int(x - y)
}

// parseIP parses an address or a CIDR ("10.0.0.1", "10.0.0.1/32", "fd00::1/128") and returns the
// address in canonical form, as Calico's ParseCIDROrIP does for pod and node addresses.
func parseIP(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '/'); i >= 0 {
		s = s[:i]
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}
