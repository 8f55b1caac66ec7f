package event

import (
	"testing"
	"time"
)

// BenchmarkEncode encodes a streamed chunk's envelope as the bus sends it
// and as the log writes it (the record), with Marshal and with the hand
// encoders; newtext builds the chunk's event. ns/op is per envelope.
func BenchmarkEncode(b *testing.B) {
	ev := NewText(AssistantText, 3, true, "chunk12 ")
	env := ev.Stamp("9f3a1c20", 1, time.Now().UTC())
	b.Run("envelope", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			env.Seq++
			if _, err := Marshal(&env); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("record", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			env.Seq++
			rec := env.Record()
			if _, err := Marshal(&rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	var buf []byte
	b.Run("append-envelope", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			env.Seq++
			var err error
			if buf, err = AppendEnvelope(buf[:0], &env); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("append-record", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			env.Seq++
			var err error
			if buf, err = AppendRecord(buf[:0], &env); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("newtext", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			NewText(AssistantText, 3, true, "chunk12 ")
		}
	})
}
