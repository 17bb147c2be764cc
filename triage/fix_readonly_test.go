package triage

import "testing"

func TestFixStepReadOnly(t *testing.T) {
	for _, tt := range []struct {
		entry string
		want  bool
	}{
		{"kubectl describe node a   # see Allocated resources", true},
		{"kubectl get pods -A -o wide | grep -v Running", true},
		{"kubectl -n shop get pod web -o jsonpath='{.status.phase}'", true},
		{"kubectl --context prod logs -n shop web -c app --previous | tail -50", true},
		{"kubectl auth can-i create pods --as system:serviceaccount:shop:web -n shop", true},
		{"kubectl rollout status deploy/web -n shop", true},
		{"kubectl apply --dry-run=server -f fix.yaml", true},
		{"On n1: journalctl -u kubelet --since -10m | grep -i error", true},
		{"On n1: systemctl status kubelet", true},
		{"On n1: crictl ps -a", true},
		{"On n1: ctr -n k8s.io images ls", true},
		{"On n1: ip route", true},
		{"On n1: mount | grep nfs", true},
		{"whypending ipam check", true},
		{"calicoctl ipam show --show-blocks", true},
		{"crane manifest registry.example.com/app:1.2", true},
		{"docker manifest inspect app:1.2 >/dev/null 2>&1 && echo ok", false}, // echo is not known
		{"kubectl logs web 2>&1 | grep -i error", true},
		{"kubectl get secret regcred -n shop -o jsonpath='{.data.\\.dockerconfigjson}' | base64 -d | jq '.auths | keys'", true},
		{"kubectl get pod web -o yaml > web.yaml", false},
		{"kubectl delete pod -n shop web", false},
		{"kubectl rollout restart deploy/web -n shop", false},
		{"kubectl auth reconcile -f rbac.yaml", false},
		{"kubectl set resources deploy/web -n shop --requests=cpu=100m", false},
		{"kubectl get pods -n shop && kubectl delete pod -n shop web", false},
		{"kubectl delete pod $(kubectl get pods -o name)", false},
		{"kubectl describe pod web; kubectl uncordon n1", false},
		{"On n1: crictl rmi --prune", false},
		{"On n1: systemctl restart kubelet", false},
		{"On n1: ip route del 10.0.0.0/8", false},
		{"On n1: mount -t nfs srv:/x /mnt", false},
		{"On n1: nc -vz nfs.example.com 2049; rpcinfo -p nfs.example.com", true},
		{"On n1: nc -vz nfs.example.com 2049; rpcinfo -d 100003 3", false}, // -d unregisters NFS v3 from the portmapper
		{"curl -X POST https://example.com", false},
		{"whypending ipam release-ips --cluster prod", false},
		{"whypending ipam unlock", false},
		{"kubectl exec -n shop web -- cat /etc/resolv.conf", false}, // exec runs anything
		{"Lower the request.", false},
		{"kubectl get pods -o jsonpath='{range .items[*]}{.metadata.name}|{end}'", true}, // | inside quotes
	} {
		if got := ParseFixStep(tt.entry).ReadOnly(); got != tt.want {
			t.Errorf("ParseFixStep(%q).ReadOnly() = %v, want %v", tt.entry, got, tt.want)
		}
	}
}
