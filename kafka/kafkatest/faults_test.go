package kafkatest

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// request is a Kafka request frame: size, api key, version, correlation
// id, client id, body.
func request(apiKey int16, corr int32, clientID string, body string) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(apiKey))
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, uint16(len(clientID)))
	b = append(b, clientID...)
	b = append(b, body...)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

func response(corr int32, body string) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(corr))
	b = append(b, body...)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

// pair is a faultConn (the broker's side) and the client's side of it.
func pair(t *testing.T, f *Faults) (*faultConn, net.Conn) {
	t.Helper()
	broker, client := net.Pipe()
	t.Cleanup(func() { broker.Close(); client.Close() })
	return &faultConn{Conn: broker, f: f, pending: map[int32]planned{}}, client
}

// TestFaultConnFrames: requests reach the broker whole and unchanged;
// responses written in pieces or several in one write reach the client
// unchanged; a lost response closes the connection in its place; the
// faults touch only the client id they are set for.
func TestFaultConnFrames(t *testing.T) {
	f := &Faults{}
	c, client := pair(t, f)
	req := request(1, 7, "floe", "fetch body")
	go func() { _, _ = client.Write(req) }()
	got := make([]byte, len(req))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != string(req) {
		t.Fatalf("broker read %q %v, want %q", got, err, req)
	}
	// Two responses, the first split across writes, the second in the
	// same write as the first's end.
	r1, r2 := response(7, "one"), response(8, "two")
	all := append(append([]byte{}, r1...), r2...)
	go func() {
		_, _ = c.Write(all[:3])
		_, _ = c.Write(all[3:])
	}()
	got = make([]byte, len(all))
	if _, err := io.ReadFull(client, got); err != nil || string(got) != string(all) {
		t.Fatalf("client read %q %v, want %q", got, err, all)
	}

	// Every request of "floe" fails with a lost response: the broker reads
	// it, its response closes the connection instead.
	f.Set(1, 1, "floe", FaultLostResponse)
	c, client = pair(t, f)
	go func() { _, _ = client.Write(request(3, 9, "floe", "")) }()
	if _, err := io.ReadFull(c, make([]byte, len(request(3, 9, "floe", "")))); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = c.Write(response(9, "meta")) }()
	_ = client.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := client.Read(make([]byte, 64))
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("client read %d bytes of a lost response (%v); want the connection closed", n, err)
	}
	if f.Counts()[FaultLostResponse] != 1 {
		t.Fatalf("counts %v", f.Counts())
	}

	// Another client id is left alone; a reset fails the broker's read.
	c, client = pair(t, f)
	kgo := request(0, 1, "kgo", "produce")
	go func() { _, _ = client.Write(kgo) }()
	if _, err := io.ReadFull(c, make([]byte, len(kgo))); err != nil {
		t.Fatalf("a kgo request was faulted: %v", err)
	}
	f.Set(1, 1, "floe", FaultReset)
	go func() { _, _ = client.Write(request(1, 2, "floe", "")) }()
	if _, err := c.Read(make([]byte, 64)); !errors.Is(err, errInjected) {
		t.Fatalf("broker read after a reset: %v", err)
	}
	if got := f.Counts(); got[FaultReset] != 1 || got[FaultLostResponse] != 1 || len(got) != 2 {
		t.Fatalf("counts %v, want one reset and one lost response (%s)", got, f.Summary())
	}
}
