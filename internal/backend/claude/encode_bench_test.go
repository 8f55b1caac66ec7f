package claude

import "github.com/kaimon/kaimon/internal/event"

// encodeEnvelope encodes env as the bus does.
func encodeEnvelope(dst []byte, env *event.Envelope) []byte {
	b, err := event.AppendEnvelope(dst, env)
	if err != nil {
		panic(err)
	}
	return b
}
