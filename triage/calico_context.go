package triage

import "fmt"

// calicoContextRules adds Calico IPAM context whenever the IPAM state was read (the collector
// reads it only when the pod's state calls for it): allocations nothing uses
// (calico-ipam-leaks) and affine blocks with no address in use (calico-ipam-empty-blocks),
// each with the action that releases them.
// calicoctlReleaseLeaks is the manual procedure the release action replaces, in the order that
// works: lock first, because a report taken before the lock is stale once the lock changes
// ClusterInformation's resourceVersion ("reports are all stale"); unlock only when the lock
// took (a lock that failed holds nothing to undo), and then whatever the check and release
// did, so the procedure never leaves the datastore locked.
const calicoctlReleaseLeaks = "calicoctl datastore migrate lock && { calicoctl ipam check -o /tmp/ipam-report.json && calicoctl ipam release --from-report=/tmp/ipam-report.json; calicoctl datastore migrate unlock; }"

// releaseLeaksChoice comes before the two ways of releasing leaked addresses: whypending's
// release (a plan, then --yes) and the calicoctl procedure it replaces do the same, so a person
// runs one of them, and only once the check shows leaks.
const releaseLeaksChoice = "If the check lists leaked addresses, release them either with whypending (its plan first, then --yes) or with calicoctl's procedure (the line after it): one of the two, not both."

func calicoContextRules(s *Snapshot) []Finding {
	if s.Pod == nil || s.IPAM == nil {
		return nil
	}
	ipam := s.IPAM
	var out []Finding
	if ipam.LeakedIPs > 0 {
		out = append(out, Finding{
			Code:     CodeCalicoIPAMLeaks,
			Severity: SeverityWarning,
			Summary: fmt.Sprintf("Calico IPAM holds %d %s that no pod or node uses (leaked); they count as used until released.",
				ipam.LeakedIPs, plural(ipam.LeakedIPs, "address", "addresses")),
			Evidence: []Evidence{leakEvidence(ipam, s.Pod.Spec.NodeName)},
			Fix: []string{
				"whypending ipam check --show-problem-ips",
				releaseLeaksChoice,
				"whypending ipam release-ips --lock  # prints the plan; add --yes to release",
				calicoctlReleaseLeaks,
			},
			Actions: []ActionRef{{Kind: actionReleaseLeakedIPs, Label: fmt.Sprintf("Release %d leaked %s", ipam.LeakedIPs, plural(ipam.LeakedIPs, "IP", "IPs"))}},
		})
	}
	if ipam.EmptyBlocks > 0 {
		f := Finding{
			Code:     CodeCalicoIPAMEmptyBlocks,
			Severity: SeverityWarning,
			Summary: fmt.Sprintf("%d affine IPAM %s no address in use; each still counts against its node's maxBlocksPerHost (%d).",
				ipam.EmptyBlocks, plural(ipam.EmptyBlocks, "block has", "blocks have"), effectiveMaxBlocks(ipam)),
			Fix: []string{
				"whypending ipam show --show-blocks",
				"whypending ipam release-blocks --all-empty  # prints the plan (each node's last block is kept); add --yes to release",
			},
			Actions: []ActionRef{{Kind: actionReleaseEmptyBlocks, Label: fmt.Sprintf("Release %d empty %s", ipam.EmptyBlocks, plural(ipam.EmptyBlocks, "block", "blocks"))}},
		}
		for _, node := range sortedKeys(ipam.EmptyBlocksByNode) {
			n := ipam.EmptyBlocksByNode[node]
			if n == 0 {
				continue
			}
			f.Evidence = append(f.Evidence, Evidence{Object: nodeObject(node), Field: "BlockAffinity",
				Message: fmt.Sprintf("%d of %d affine %s empty", n, ipam.NodeBlocks[node], plural(ipam.NodeBlocks[node], "block", "blocks"))})
		}
		out = append(out, f)
	}
	return out
}
