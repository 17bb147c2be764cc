package calico

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
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
	k8sProtoMagic   = []byte("k8s\x00")
	errBadListProto = errors.New("malformed protobuf list")
	errNotPodProto  = errors.New("response is not protobuf")
)

// decodePodList reads a PodList response body from r (protobuf, with the "k8s\0" envelope,
// or JSON) and calls fn with each pod's fields. A protobuf body is read one pod at a time
// (listStream.eachItem), so the list is never held whole.
func decodePodList(r io.Reader, fn func(*podFields)) error {
	ls, ok := openListStream(r)
	if !ok {
		body, err := io.ReadAll(ls.r)
		if err != nil {
			return err
		}
		return decodePodListJSON(body, fn)
	}
	_, err := ls.eachItem(func(item []byte) error {
		var p podFields
		if err := decodePod(item, &p); err != nil {
			return err
		}
		fn(&p)
		return nil
	})
	return err
}

// objectMetaFields are the metadata fields a metadata-only list keeps.
type objectMetaFields struct {
	name, uid, resourceVersion string
	created                    time.Time
}

// decodeMetadataList reads a PartialObjectMetadataList response body (protobuf, with the
// "k8s\0" envelope) from r, one item at a time, and calls fn with each item's name, UID,
// resourceVersion and creation time; the rest of the metadata (managedFields above all) is
// skipped unparsed. It returns the list's metadata (the continue token of a page).
func decodeMetadataList(r io.Reader, fn func(*objectMetaFields)) (listMeta, error) {
	ls, ok := openListStream(r)
	if !ok {
		return listMeta{}, errNotPodProto
	}
	return ls.eachItem(func(item []byte) error {
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

// listStream reads a protobuf list response body: the "k8s\0" magic, then a runtime.Unknown
// whose raw field (2) holds the list message, whose metadata is field 1 and items field 2.
type listStream struct {
	r   *bufio.Reader
	end *endReader
}

// openListStream starts reading a response body; ok is false when it is not protobuf (then
// ls.r still yields the whole body).
func openListStream(r io.Reader) (ls listStream, ok bool) {
	end := &endReader{r: r}
	ls = listStream{r: bufio.NewReaderSize(end, 64<<10), end: end}
	magic, err := ls.r.Peek(len(k8sProtoMagic))
	return ls, err == nil && bytes.Equal(magic, k8sProtoMagic)
}

// endReader remembers whether its reader ended cleanly (io.EOF): a body that ends cleanly
// inside a message is malformed, while a broken connection ends with an error of its own
// (net/http reports io.ErrUnexpectedEOF), which the caller should see.
type endReader struct {
	r     io.Reader
	ended bool
}

func (e *endReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF {
		e.ended = true
	}
	return n, err
}

// eachItem calls fn with each item's bytes in turn, in a buffer it reuses (fn must copy what
// it keeps), skipping every other field, and returns the list's metadata. Only one item is
// in memory at a time. A body without the list, or that ends inside a message, is
// errBadListProto.
func (ls listStream) eachItem(fn func(item []byte) error) (listMeta, error) {
	var meta listMeta
	if _, err := ls.r.Discard(len(k8sProtoMagic)); err != nil {
		return meta, errBadListProto
	}
	unknown := &protoStream{listStream: ls, left: -1}
	var buf []byte
	sawList := false
	for {
		_, size, err := unknown.nextBytes(2) // runtime.Unknown.raw: the list message
		if err == io.EOF {
			if !sawList {
				return meta, errBadListProto
			}
			return meta, nil
		}
		if err != nil {
			return meta, err
		}
		sawList = true
		list := &protoStream{listStream: ls, left: int64(size)}
		for {
			num, n, err := list.nextBytes(1, 2) // metadata or an item
			if err == io.EOF {
				break
			}
			if err != nil {
				return meta, err
			}
			if n > maxListItemBytes {
				return meta, errBadListProto
			}
			if uint64(cap(buf)) < n {
				buf = make([]byte, n)
			}
			buf = buf[:n]
			if err := list.read(buf); err != nil {
				return meta, err
			}
			if num == 1 {
				if meta, err = listMetaOf(buf); err != nil {
					return meta, err
				}
				continue
			}
			if err := fn(buf); err != nil {
				return meta, err
			}
		}
	}
}

// listMetaOf decodes a ListMeta: resourceVersion = 2, continue = 3.
func listMetaOf(b []byte) (listMeta, error) {
	var m listMeta
	err := eachField(b, func(n protowire.Number, v []byte, _ uint64) error {
		switch n {
		case 2:
			m.ResourceVersion = string(v)
		case 3:
			m.Continue = string(v)
		}
		return nil
	})
	return m, err
}

// maxListItemBytes bounds one list item read by eachItem (etcd stores objects of at most
// 1.5 MiB by default; this leaves room for larger limits while refusing a corrupt length).
const maxListItemBytes = 64 << 20

// protoStream reads protobuf fields from a list stream: left is how many bytes of the
// enclosing message remain (-1: up to the end of the body).
type protoStream struct {
	listStream
	left int64
}

// ReadByte makes protoStream an io.ByteReader for binary.ReadUvarint.
func (s *protoStream) ReadByte() (byte, error) {
	if s.left == 0 {
		return 0, io.EOF
	}
	b, err := s.r.ReadByte()
	if err != nil {
		return 0, s.err(err)
	}
	s.consumed(1)
	return b, nil
}

func (s *protoStream) consumed(n int64) {
	if s.left > 0 {
		s.left -= n
	}
}

// err is errBadListProto when the body ended cleanly inside a message, else err itself (a
// broken connection, a cancelled context), so that the caller sees the real cause.
func (s *protoStream) err(err error) error {
	if s.end.ended && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) {
		return errBadListProto
	}
	return err
}

// nextBytes skips fields up to the next length-delimited field whose number is one of nums
// and returns its number and length, leaving the stream at its payload; io.EOF at the end of
// the message.
func (s *protoStream) nextBytes(nums ...protowire.Number) (protowire.Number, uint64, error) {
	for {
		num, typ, err := s.tag()
		if err != nil {
			return 0, 0, err
		}
		if typ == protowire.BytesType && slices.Contains(nums, num) {
			n, err := s.varint()
			return num, n, err
		}
		if err := s.skip(typ); err != nil {
			return 0, 0, err
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
		return 0, 0, errBadListProto
	}
	return num, typ, nil
}

func (s *protoStream) varint() (uint64, error) {
	x, err := binary.ReadUvarint(s)
	if err != nil {
		return 0, s.err(err)
	}
	return x, nil
}

// read fills buf from the message.
func (s *protoStream) read(buf []byte) error {
	if s.left >= 0 && int64(len(buf)) > s.left {
		return errBadListProto
	}
	if _, err := io.ReadFull(s.r, buf); err != nil {
		return s.err(err)
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
		return errBadListProto
	}
	if (s.left >= 0 && n > uint64(s.left)) || n > math.MaxInt32 {
		return errBadListProto
	}
	if _, err := s.r.Discard(int(n)); err != nil {
		return s.err(err)
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
			return errBadListProto
		}
		b = b[n:]
		switch typ {
		case protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return errBadListProto
			}
			b = b[n:]
			if err := fn(num, v, 0); err != nil {
				return err
			}
		case protowire.VarintType:
			x, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return errBadListProto
			}
			b = b[n:]
			if err := fn(num, nil, x); err != nil {
				return err
			}
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return errBadListProto
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
