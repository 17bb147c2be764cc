package calico

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
)

// Listing pods is the bulk of a check: tens of thousands of full Pod objects. Decoding them
// into corev1.Pod costs more CPU and memory than everything else together, so pod lists are
// read as protobuf and only the few fields Calico looks at are picked out, skipping the rest
// unparsed. The field numbers are those of k8s.io/api/core/v1 and apimachinery meta/v1
// generated.proto, which Kubernetes keeps stable across versions.

// podFields are the pod fields that decide whether and which addresses a pod uses.
type podFields struct {
	namespace, name, node, phase, podIP string
	podIPs                              []string
	hostNetwork, deleting               bool
	// Calico's IP annotations; nil when absent (an empty value is meaningful).
	annIP, annIPs, annAWS *string
}

var (
	k8sProtoMagic  = []byte("k8s\x00")
	errBadPodProto = errors.New("malformed protobuf pod list")
	errNotPodProto = errors.New("response is not protobuf")
)

// decodePodList parses a PodList response body (protobuf, with the "k8s\0" envelope, or JSON)
// and calls fn with each pod's fields.
func decodePodList(body []byte, fn func(*podFields)) error {
	if !bytes.HasPrefix(body, k8sProtoMagic) {
		return decodePodListJSON(body, fn)
	}
	// runtime.Unknown: raw = 2.
	raw, err := field(body[len(k8sProtoMagic):], 2)
	if err != nil {
		return err
	}
	return eachField(raw, func(num protowire.Number, v []byte, _ uint64) error {
		if num == 2 { // items
			var p podFields
			if err := decodePod(v, &p); err != nil {
				return err
			}
			fn(&p)
		}
		return nil
	})
}

// objectMetaFields are the metadata fields a metadata-only list keeps.
type objectMetaFields struct {
	name, uid, resourceVersion string
	created                    time.Time
}

// decodeMetadataList parses a PartialObjectMetadataList response body (protobuf, with the
// "k8s\0" envelope) and calls fn with each item's name, UID, resourceVersion and creation time;
// the rest of the metadata (managedFields above all) is skipped unparsed.
func decodeMetadataList(body []byte, fn func(*objectMetaFields)) error {
	if !bytes.HasPrefix(body, k8sProtoMagic) {
		return errNotPodProto
	}
	raw, err := field(body[len(k8sProtoMagic):], 2)
	if err != nil {
		return err
	}
	return eachField(raw, func(num protowire.Number, item []byte, _ uint64) error {
		if num != 2 { // items: PartialObjectMetadata
			return nil
		}
		meta, err := field(item, 1) // ObjectMeta
		if err != nil {
			return err
		}
		var o objectMetaFields
		err = eachField(meta, func(n protowire.Number, v []byte, _ uint64) error {
			switch n {
			case 1:
				o.name = string(v)
			case 5:
				o.uid = string(v)
			case 6:
				o.resourceVersion = string(v)
			case 8: // Time: seconds = 1, nanos = 2
				var sec, nsec uint64
				err := eachField(v, func(n protowire.Number, _ []byte, x uint64) error {
					if n == 1 {
						sec = x
					} else if n == 2 {
						nsec = x
					}
					return nil
				})
				o.created = time.Unix(int64(sec), int64(nsec))
				return err
			}
			return nil
		})
		if err != nil {
			return err
		}
		fn(&o)
		return nil
	})
}

func decodePod(b []byte, p *podFields) error {
	return eachField(b, func(num protowire.Number, v []byte, _ uint64) error {
		switch num {
		case 1: // ObjectMeta
			return eachField(v, func(n protowire.Number, v []byte, _ uint64) error {
				switch n {
				case 1:
					p.name = string(v)
				case 3:
					p.namespace = string(v)
				case 9:
					p.deleting = true
				case 12:
					var key, val []byte
					err := eachField(v, func(n protowire.Number, v []byte, _ uint64) error {
						if n == 1 {
							key = v
						} else if n == 2 {
							val = v
						}
						return nil
					})
					p.setAnnotation(string(key), string(val))
					return err
				}
				return nil
			})
		case 2: // PodSpec
			return eachField(v, func(n protowire.Number, v []byte, x uint64) error {
				switch n {
				case 10:
					p.node = string(v)
				case 11:
					p.hostNetwork = x != 0
				}
				return nil
			})
		case 3: // PodStatus
			return eachField(v, func(n protowire.Number, v []byte, _ uint64) error {
				switch n {
				case 1:
					p.phase = string(v)
				case 6:
					p.podIP = string(v)
				case 12:
					ip, err := field(v, 1)
					p.podIPs = append(p.podIPs, string(ip))
					return err
				}
				return nil
			})
		}
		return nil
	})
}

// eachField calls fn for every length-delimited and varint field of a protobuf message: v is
// the payload of a length-delimited field, x the value of a varint field; other wire types are
// skipped.
func eachField(b []byte, fn func(num protowire.Number, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errBadPodProto
		}
		b = b[n:]
		switch typ {
		case protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return errBadPodProto
			}
			b = b[n:]
			if err := fn(num, v, 0); err != nil {
				return err
			}
		case protowire.VarintType:
			x, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return errBadPodProto
			}
			b = b[n:]
			if err := fn(num, nil, x); err != nil {
				return err
			}
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return errBadPodProto
			}
			b = b[n:]
		}
	}
	return nil
}

// field returns the last occurrence of length-delimited field num of message b.
func field(b []byte, num protowire.Number) ([]byte, error) {
	var out []byte
	err := eachField(b, func(n protowire.Number, v []byte, _ uint64) error {
		if n == num {
			out = v
		}
		return nil
	})
	return out, err
}

func decodePodListJSON(body []byte, fn func(*podFields)) error {
	var list corev1.PodList
	if err := json.Unmarshal(body, &list); err != nil {
		return fmt.Errorf("%w: %w", errNotPodProto, err)
	}
	for i := range list.Items {
		fn(podFieldsOf(&list.Items[i]))
	}
	return nil
}

// podFieldsOf extracts podFields from a typed pod.
func podFieldsOf(pod *corev1.Pod) *podFields {
	p := &podFields{namespace: pod.Namespace, name: pod.Name, node: pod.Spec.NodeName, phase: string(pod.Status.Phase),
		podIP: pod.Status.PodIP, hostNetwork: pod.Spec.HostNetwork, deleting: pod.DeletionTimestamp != nil}
	for _, ip := range pod.Status.PodIPs {
		p.podIPs = append(p.podIPs, ip.IP)
	}
	for _, k := range []string{annPodIP, annPodIPs, annAWSIPs} {
		if v, ok := pod.Annotations[k]; ok {
			p.setAnnotation(k, v)
		}
	}
	return p
}

// setAnnotation records the annotations Calico reads and ignores the others.
func (p *podFields) setAnnotation(k, v string) {
	switch k {
	case annPodIP:
		p.annIP = &v
	case annPodIPs:
		p.annIPs = &v
	case annAWSIPs:
		p.annAWS = &v
	}
}
