// Package imaging bounds the images agents pass around in tool results.
// Images are the biggest token consumer (roughly width × height / 750
// tokens), so a PNG whose long edge exceeds the configured maximum
// (agent_image_max_long_edge, default 1568 px, the model's own effective
// cap) is box-downsampled to that long edge before its event is logged or
// published. Other images, and PNGs within the bound, pass unchanged.
package imaging

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"image"
	"image/draw"
	"image/png"
	"math"

	"github.com/tidwall/gjson"

	"github.com/kaimon/kaimon/internal/event"
)

// MaxPixels bounds the images decoded (a 100-megapixel PNG needs 400 MB
// in memory); larger ones pass unchanged.
const MaxPixels = 100 << 20

// ShrinkEvent returns ev with every PNG image content block of a
// tool_result ({"type":"content","content":{"type":"image",
// "mimeType":"image/png","data":BASE64}} in data.update.content) whose long
// edge exceeds maxEdge replaced by a box-downsampled copy whose long edge
// is maxEdge. The rest of the data is kept byte for byte. Any other event,
// and any image it cannot read, is returned as it is.
func ShrinkEvent(ev event.Event, maxEdge int) event.Event {
	if ev.Kind != event.ToolResult || maxEdge <= 0 || !bytes.Contains(ev.Data, []byte(`"image/png"`)) {
		return ev
	}
	type edit struct {
		at, n int
		with  []byte
	}
	var edits []edit
	n := int(gjson.GetBytes(ev.Data, "update.content.#").Int())
	for i := 0; i < n; i++ {
		c := gjson.GetBytes(ev.Data, fmt.Sprintf("update.content.%d.content", i))
		if c.Get("type").String() != "image" || c.Get("mimeType").String() != "image/png" {
			continue
		}
		d := gjson.GetBytes(ev.Data, fmt.Sprintf("update.content.%d.content.data", i))
		if d.Type != gjson.String || d.Index <= 0 || string(ev.Data[d.Index:d.Index+len(d.Raw)]) != d.Raw {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(d.Str)
		if err != nil {
			continue
		}
		small, changed, err := ShrinkPNG(raw, maxEdge)
		if err != nil || !changed {
			continue
		}
		// Base64 needs no JSON escaping.
		with := append(append([]byte{'"'}, base64.StdEncoding.EncodeToString(small)...), '"')
		edits = append(edits, edit{at: d.Index, n: len(d.Raw), with: with})
	}
	if len(edits) == 0 {
		return ev
	}
	var out []byte
	prev := 0
	for _, e := range edits { // in document order
		out = append(out, ev.Data[prev:e.at]...)
		out = append(out, e.with...)
		prev = e.at + e.n
	}
	out = append(out, ev.Data[prev:]...)
	ev.Data = out
	return ev
}

// ShrinkPNG box-downsamples a PNG whose long edge exceeds maxEdge so that
// its long edge is maxEdge, keeping the aspect ratio. changed is false (and
// data returned as is) when the image is within the bound.
func ShrinkPNG(data []byte, maxEdge int) (out []byte, changed bool, err error) {
	cfg, err := png.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return data, false, err
	}
	w, h := cfg.Width, cfg.Height
	if max(w, h) <= maxEdge || maxEdge <= 0 {
		return data, false, nil
	}
	if int64(w)*int64(h) > MaxPixels {
		return data, false, errors.New("image too large to decode")
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		return data, false, err
	}
	dw, dh := Fit(w, h, maxEdge)
	var buf bytes.Buffer
	if err := png.Encode(&buf, Box(img, dw, dh)); err != nil {
		return data, false, err
	}
	return buf.Bytes(), true, nil
}

// Fit scales w×h so that its long edge is maxEdge.
func Fit(w, h, maxEdge int) (int, int) {
	if w >= h {
		return maxEdge, max(1, int(math.Round(float64(h)*float64(maxEdge)/float64(w))))
	}
	return max(1, int(math.Round(float64(w)*float64(maxEdge)/float64(h)))), maxEdge
}

// tap is one source pixel's share of a destination pixel.
type tap struct {
	i int
	w float32
}

// spans maps each of m destination pixels to the source pixels (of n) it
// covers, weighted by the part of each it covers: an area average.
func spans(n, m int) [][]tap {
	scale := float64(n) / float64(m)
	out := make([][]tap, m)
	for d := range out {
		lo, hi := float64(d)*scale, float64(d+1)*scale
		for s := int(lo); s < n && float64(s) < hi; s++ {
			cover := math.Min(hi, float64(s+1)) - math.Max(lo, float64(s))
			if cover > 1e-9 {
				out[d] = append(out[d], tap{i: s, w: float32(cover / scale)})
			}
		}
	}
	return out
}

// Box downsamples src to w×h: each destination pixel is the average of the
// source pixels under it, weighted by how much of each it covers. It
// averages premultiplied colour, so a transparent pixel's hidden colour
// does not bleed into its neighbours. It works a source row at a time, so
// it needs memory for the result and a few rows, not for a copy of src.
func Box(src image.Image, w, h int) *image.NRGBA {
	b := src.Bounds()
	sw, sh := b.Dx(), b.Dy()
	xs, ys := spans(sw, w), spans(sh, h)
	dst := image.NewNRGBA(image.Rect(0, 0, w, h))
	row := image.NewRGBA(image.Rect(0, 0, sw, 1)) // premultiplied
	hrow := make([]float32, 4*w)                  // one source row, reduced across
	acc := make([]float32, 4*w)
	last := -1
	for y, vt := range ys {
		clear(acc)
		for _, t := range vt {
			if t.i != last {
				draw.Draw(row, row.Rect, src, image.Pt(b.Min.X, b.Min.Y+t.i), draw.Src)
				for x, ht := range xs {
					var r, g, bl, a float32
					for _, u := range ht {
						p := row.Pix[4*u.i : 4*u.i+4 : 4*u.i+4]
						r += u.w * float32(p[0])
						g += u.w * float32(p[1])
						bl += u.w * float32(p[2])
						a += u.w * float32(p[3])
					}
					hrow[4*x], hrow[4*x+1], hrow[4*x+2], hrow[4*x+3] = r, g, bl, a
				}
				last = t.i
			}
			for i, v := range hrow {
				acc[i] += t.w * v
			}
		}
		out := dst.Pix[y*dst.Stride : y*dst.Stride+4*w]
		for x := 0; x < w; x++ {
			a := acc[4*x+3]
			if a < 0.5 {
				continue // fully transparent: leave zero
			}
			for c := 0; c < 3; c++ {
				out[4*x+c] = clamp8(acc[4*x+c] * 255 / a)
			}
			out[4*x+3] = clamp8(a)
		}
	}
	return dst
}

func clamp8(v float32) uint8 {
	v = float32(math.Round(float64(v)))
	switch {
	case v <= 0:
		return 0
	case v >= 255:
		return 255
	}
	return uint8(v)
}
