package calico

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

// decodePodList reads a PodList response body from r (protobuf, with the "k8s\0" envelope,
// or JSON) and calls fn with each pod's fields. A protobuf body is read one pod at a time
// (eachListItem), so the list is never held whole.
func decodePodList(r io.Reader, fn func(*podFields)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	if magic, err := br.Peek(len(k8sProtoMagic)); err != nil || !bytes.Equal(magic, k8sProtoMagic) {
		body, err := io.ReadAll(br)
		if err != nil {
			return err
		}
		return decodePodListJSON(body, fn)
	}
	return eachListItem(br, func(item []byte) error {
		var p podFields
		if err := decodePod(item, &p); err != nil {
			return err
		}
		fn(&p)
		return nil
	})
}

// objectMetaFields are the metadata fields a metadata-only list keeps.
type objectMetaFields struct {
	name, uid, resourceVersion string
	created                    time.Time
}

// decodeMetadataList reads a PartialObjectMetadataList response body (protobuf, with the
// "k8s\0" envelope) from r, one item at a time, and calls fn with each item's name, UID,
// resourceVersion and creation time; the rest of the metadata (managedFields above all) is
// skipped unparsed.
func decodeMetadataList(r io.Reader, fn func(*objectMetaFields)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	if magic, err := br.Peek(len(k8sProtoMagic)); err != nil || !bytes.Equal(magic, k8sProtoMagic) {
		return errNotPodProto
	}
	return eachListItem(br, func(item []byte) error {
		meta, err := field(item, 1) // PartialObjectMetadata: ObjectMeta = 1
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

// maxListItemBytes bounds one list item read by eachListItem (etcd stores objects of at most
// 1.5 MiB by default; this leaves room for larger limits while refusing a corrupt length).
const maxListItemBytes = 64 << 20

// eachListItem reads a protobuf list response from br, which starts with the "k8s\0" magic: a
// runtime.Unknown whose raw field (2) holds the list message, whose items are field 2. It
// calls fn with each item's bytes in turn, in a buffer it reuses (fn must copy what it keeps),
// and skips every other field. Only one item is in memory at a time.
func eachListItem(br *bufio.Reader, fn func(item []byte) error) error {
	if _, err := br.Discard(len(k8sProtoMagic)); err != nil {
		return errBadPodProto
	}
	unknown := &protoStream{r: br, left: -1}
	var buf []byte
	for {
		size, err := unknown.nextBytes(2) // runtime.Unknown.raw: the list message
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		list := &protoStream{r: br, left: int64(size)}
		for {
			n, err := list.nextBytes(2) // items
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
			if n > maxListItemBytes {
				return errBadPodProto
			}
			if uint64(cap(buf)) < n {
				buf = make([]byte, n)
			}
			buf = buf[:n]
			if err := list.read(buf); err != nil {
				return err
			}
			if err := fn(buf); err != nil {
				return err
			}
		}
	}
}

// protoStream reads protobuf fields from a stream: left is how many bytes of the enclosing
// message remain (-1: up to the end of the stream).
type protoStream struct {
	r    *bufio.Reader
	left int64
}

// ReadByte makes protoStream an io.ByteReader for binary.ReadUvarint.
func (s *protoStream) ReadByte() (byte, error) {
	if s.left == 0 {
		return 0, io.EOF
	}
	b, err := s.r.ReadByte()
	if err != nil {
		return 0, streamErr(err) // the stream ended inside the message, or the read failed
	}
	s.consumed(1)
	return b, nil
}

func (s *protoStream) consumed(n int64) {
	if s.left > 0 {
		s.left -= n
	}
}

// nextBytes skips fields up to the next length-delimited field num and returns its length,
// leaving the stream at its payload; io.EOF at the end of the message.
func (s *protoStream) nextBytes(num protowire.Number) (uint64, error) {
	for {
		n, typ, err := s.tag()
		if err != nil {
			return 0, err
		}
		if n == num && typ == protowire.BytesType {
			return s.varint()
		}
		if err := s.skip(typ); err != nil {
			return 0, err
		}
	}
}

// tag reads a field's tag; io.EOF at the end of the message.
func (s *protoStream) tag() (protowire.Number, protowire.Type, error) {
	if s.left == 0 {
		return 0, 0, io.EOF
	}
	if s.left < 0 {
		if _, err := s.r.Peek(1); err == io.EOF {
			return 0, 0, io.EOF // the end of the body
		} else if err != nil {
			return 0, 0, err
		}
	}
	x, err := s.varint()
	if err != nil {
		return 0, 0, err
	}
	num, typ := protowire.DecodeTag(x)
	if num <= 0 {
		return 0, 0, errBadPodProto
	}
	return num, typ, nil
}

func (s *protoStream) varint() (uint64, error) {
	x, err := binary.ReadUvarint(s)
	if err != nil {
		return 0, streamErr(err)
	}
	return x, nil
}

// streamErr is errBadPodProto for a body that ended early, else err itself (a failed read of
// the connection, a cancelled context), so that the caller sees the real cause.
func streamErr(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errBadPodProto
	}
	return err
}

// read fills buf from the message.
func (s *protoStream) read(buf []byte) error {
	if s.left >= 0 && int64(len(buf)) > s.left {
		return errBadPodProto
	}
	if _, err := io.ReadFull(s.r, buf); err != nil {
		return streamErr(err)
	}
	s.consumed(int64(len(buf)))
	return nil
}

// skip skips the value of a field of wire type typ.
func (s *protoStream) skip(typ protowire.Type) error {
	var n uint64
	switch typ {
	case protowire.VarintType:
		_, err := s.varint()
		return err
	case protowire.Fixed32Type:
		n = 4
	case protowire.Fixed64Type:
		n = 8
	case protowire.BytesType:
		var err error
		if n, err = s.varint(); err != nil {
			return err
		}
	default:
		return errBadPodProto
	}
	if s.left >= 0 && n > uint64(s.left) {
		return errBadPodProto
	}
	if _, err := s.r.Discard(int(n)); err != nil {
		return streamErr(err)
	}
	s.consumed(int64(n))
	return nil
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
