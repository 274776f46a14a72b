package watcher

import (
	"bufio"
	"bytes"
	"errors"
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

// encodeProtobuf encodes obj as the API server sends it in protobuf.
func encodeProtobuf(t testing.TB, obj runtime.Object) []byte {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	codecs := serializer.NewCodecFactory(scheme)
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), "application/vnd.kubernetes.protobuf")
	if !ok {
		t.Fatal("no protobuf serializer")
	}
	data, err := runtime.Encode(codecs.EncoderForVersion(info.Serializer, v1.SchemeGroupVersion), obj)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func readProtobufServices(data []byte, each func(runtime.Object) error) (metav1.ListMeta, error) {
	r := bufio.NewReader(bytes.NewReader(data))
	if magic, err := r.Peek(len(protobufMagic)); err != nil || !bytes.Equal(magic, protobufMagic) {
		return metav1.ListMeta{}, errProtobuf
	}
	_, _ = r.Discard(len(protobufMagic))
	return eachProtobufItem(r, func() protoObject { return &v1.Service{} }, each)
}

// A list in protobuf is read one item at a time, with its metadata; one
// cut short is an error, as is each's.
func TestEachProtobufItem(t *testing.T) {
	// The first item is the largest, so the buffer is reused for
	// shorter ones.
	big := service(func(s *v1.Service) {
		s.Name = "big"
		s.Annotations = map[string]string{"note": strings.Repeat("x", 4000)}
	})
	list := &v1.ServiceList{
		ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: "more"},
		Items:    []v1.Service{*big, *service(), *service(func(s *v1.Service) { s.Name = "c"; s.Spec.Ports = nil })},
	}
	full := encodeProtobuf(t, list)
	empty := encodeProtobuf(t, &v1.ServiceList{ListMeta: metav1.ListMeta{ResourceVersion: "7"}})
	stop := errors.New("stop")
	tests := []struct {
		name     string
		data     []byte
		stopAt   int
		want     []v1.Service
		wantMeta metav1.ListMeta
		wantErr  error
	}{
		{name: "list", data: full, want: list.Items, wantMeta: list.ListMeta},
		{name: "empty", data: empty, wantMeta: metav1.ListMeta{ResourceVersion: "7"}},
		{name: "each fails", data: full, stopAt: 2, want: list.Items[:2], wantErr: stop},
		{name: "cut in the last item", data: full[:len(full)-10], want: list.Items[:2], wantErr: errProtobuf},
		{name: "cut in the first item", data: full[:200], wantErr: errProtobuf},
		{name: "magic only", data: full[:4], wantErr: errProtobuf},
		{name: "not protobuf", data: []byte(`{"kind":"ServiceList"}`), wantErr: errProtobuf},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []v1.Service
			meta, err := readProtobufServices(tt.data, func(o runtime.Object) error {
				got = append(got, *o.(*v1.Service))
				if len(got) == tt.stopAt {
					return stop
				}
				return nil
			})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("error %v, want %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("items (-want +got):\n%s", diff)
			}
			if tt.wantErr == nil && !cmp.Equal(meta, tt.wantMeta) {
				t.Errorf("metadata %+v, want %+v", meta, tt.wantMeta)
			}
		})
	}
}

// FuzzProtobufList reads arbitrary bytes as a protobuf list: nothing may
// panic, and every failure is a malformed list.
func FuzzProtobufList(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := readProtobufServices(data, func(runtime.Object) error { return nil })
		if err != nil && !errors.Is(err, errProtobuf) {
			t.Fatalf("error not marked malformed: %v", err)
		}
	})
}

// A few bytes claiming a field of 2 TiB, within a list claiming as much,
// fail as truncated without allocating anywhere near it: the lengths are
// the input's, not what the reader trusts.
func TestProtobufListClaimsMoreThanItHolds(t *testing.T) {
	data := []byte("k8s\x00\x12\x80\x80\x80\x80\x80@\x12\xf9\xff\xff\xff\xff?abcd")
	if len(data) != 22 {
		t.Fatalf("the case is %d bytes, want 22", len(data))
	}
	var before, after goruntime.MemStats
	goruntime.ReadMemStats(&before)
	_, err := readProtobufServices(data, func(runtime.Object) error { return nil })
	goruntime.ReadMemStats(&after)
	if !errors.Is(err, errProtobuf) {
		t.Fatalf("error %v, want a malformed list", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 4<<20 {
		t.Errorf("allocated %d bytes reading 22", got)
	}
}
