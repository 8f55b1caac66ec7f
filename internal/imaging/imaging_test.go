package imaging

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/kaimon/kaimon/internal/event"
)

func encodePNG(t *testing.T, img image.Image) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func decodePNG(t *testing.T, b []byte) image.Image {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// fill makes a w×h image coloured by f.
func fill(w, h int, f func(x, y int) color.NRGBA) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.SetNRGBA(x, y, f(x, y))
		}
	}
	return img
}

func near(a, b uint8) bool { return a-b <= 1 || b-a <= 1 }

func TestFit(t *testing.T) {
	for _, c := range []struct{ w, h, max, ww, wh int }{
		{3136, 1568, 1568, 1568, 784},
		{1000, 3000, 1568, 523, 1568},
		{5000, 1, 1568, 1568, 1},
		{2000, 2000, 100, 100, 100},
	} {
		if w, h := Fit(c.w, c.h, c.max); w != c.ww || h != c.wh {
			t.Errorf("Fit(%d, %d, %d) = %d×%d, want %d×%d", c.w, c.h, c.max, w, h, c.ww, c.wh)
		}
	}
}

// Each destination pixel is the average of the source pixels under it.
func TestBoxAverages(t *testing.T) {
	// A 1-pixel checkerboard, 4:1: every destination pixel averages 8
	// black and 8 white pixels.
	checker := fill(400, 200, func(x, y int) color.NRGBA {
		if (x+y)%2 == 0 {
			return color.NRGBA{255, 255, 255, 255}
		}
		return color.NRGBA{0, 0, 0, 255}
	})
	out := Box(checker, 100, 50)
	for _, p := range [][2]int{{0, 0}, {50, 25}, {99, 49}} {
		if c := out.NRGBAAt(p[0], p[1]); !near(c.R, 128) || c.R != c.G || c.G != c.B || c.A != 255 {
			t.Fatalf("checker at %v = %v, want grey 128", p, c)
		}
	}
	// Halves that align with the destination grid stay pure.
	halves := fill(400, 200, func(x, y int) color.NRGBA {
		if x < 200 {
			return color.NRGBA{255, 0, 0, 255}
		}
		return color.NRGBA{0, 0, 255, 255}
	})
	out = Box(halves, 100, 50)
	if l, r := out.NRGBAAt(49, 10), out.NRGBAAt(50, 10); l != (color.NRGBA{255, 0, 0, 255}) || r != (color.NRGBA{0, 0, 255, 255}) {
		t.Fatalf("halves: %v | %v", l, r)
	}
	// 3 → 2 across: destination pixel 0 covers source 0 and half of 1.
	row := fill(3, 1, func(x, y int) color.NRGBA { return color.NRGBA{uint8(x * 90), 0, 0, 255} })
	out = Box(row, 2, 1)
	// (0·1 + 90·0.5) / 1.5 = 30; (90·0.5 + 180·1) / 1.5 = 150
	if a, b := out.NRGBAAt(0, 0).R, out.NRGBAAt(1, 0).R; a != 30 || b != 150 {
		t.Fatalf("3→2 = %d, %d; want 30, 150", a, b)
	}
	// Premultiplied: a transparent pixel's hidden green does not bleed.
	pair := fill(2, 1, func(x, y int) color.NRGBA {
		if x == 0 {
			return color.NRGBA{0, 255, 0, 0}
		}
		return color.NRGBA{255, 0, 0, 255}
	})
	if c := Box(pair, 1, 1).NRGBAAt(0, 0); c != (color.NRGBA{255, 0, 0, 128}) {
		t.Fatalf("transparent + red = %v, want red at half alpha", c)
	}
}

func TestShrinkPNG(t *testing.T) {
	big := encodePNG(t, fill(3000, 1000, func(x, y int) color.NRGBA { return color.NRGBA{uint8(x), uint8(y), 7, 255} }))
	out, changed, err := ShrinkPNG(big, 1568)
	if err != nil || !changed {
		t.Fatalf("changed %v, err %v", changed, err)
	}
	if b := decodePNG(t, out).Bounds(); b.Dx() != 1568 || b.Dy() != 523 {
		t.Fatalf("shrunk to %v", b)
	}
	// Within the bound, on the bound, and a gray image: unchanged or fine.
	small := encodePNG(t, fill(1568, 20, func(x, y int) color.NRGBA { return color.NRGBA{1, 2, 3, 255} }))
	if out, changed, err := ShrinkPNG(small, 1568); changed || err != nil || !bytes.Equal(out, small) {
		t.Fatalf("at the bound: changed %v, err %v", changed, err)
	}
	gray := image.NewGray(image.Rect(0, 0, 200, 400))
	for i := range gray.Pix {
		gray.Pix[i] = 200
	}
	out, changed, err = ShrinkPNG(encodePNG(t, gray), 100)
	if err != nil || !changed {
		t.Fatal(changed, err)
	}
	if img := decodePNG(t, out); img.Bounds().Dx() != 50 || img.Bounds().Dy() != 100 {
		t.Fatalf("gray shrunk to %v", img.Bounds())
	} else if r, _, _, a := img.At(10, 10).RGBA(); r>>8 != 200 || a>>8 != 255 {
		t.Fatalf("gray pixel = %v", img.At(10, 10))
	}
	if _, _, err := ShrinkPNG([]byte("not a png"), 10); err == nil {
		t.Fatal("not a png: want an error")
	}
}

func toolResult(t *testing.T, blocks ...any) event.Event {
	return event.New(event.ToolResult, 3, map[string]any{"update": map[string]any{
		"toolCallId": "tu1", "status": "completed", "content": blocks}})
}

func imageBlock(mime string, data []byte) any {
	return map[string]any{"type": "content", "content": map[string]any{
		"type": "image", "mimeType": mime, "data": base64.StdEncoding.EncodeToString(data)}}
}

func textBlock(s string) any {
	return map[string]any{"type": "content", "content": map[string]any{"type": "text", "text": s}}
}

// A tool result's large PNGs shrink; its small PNGs, other images, text and
// every other byte stay as they were.
func TestShrinkEvent(t *testing.T) {
	big := encodePNG(t, fill(800, 400, func(x, y int) color.NRGBA { return color.NRGBA{200, 10, 10, 255} }))
	small := encodePNG(t, fill(10, 10, func(x, y int) color.NRGBA { return color.NRGBA{1, 1, 1, 255} }))
	var jb bytes.Buffer
	if err := jpeg.Encode(&jb, fill(800, 400, func(x, y int) color.NRGBA { return color.NRGBA{1, 1, 1, 255} }), nil); err != nil {
		t.Fatal(err)
	}
	ev := toolResult(t, textBlock("a <b> & c"), imageBlock("image/png", big), imageBlock("image/jpeg", jb.Bytes()),
		imageBlock("image/png", small), imageBlock("image/png", big))
	got := ShrinkEvent(ev, 100)
	if got.Kind != ev.Kind || got.Turn != ev.Turn || !json.Valid(got.Data) {
		t.Fatalf("event = %s %d %s", got.Kind, got.Turn, got.Data)
	}
	c := gjson.GetBytes(got.Data, "update.content").Array()
	if len(c) != 5 || c[0].Get("content.text").String() != "a <b> & c" {
		t.Fatalf("content = %s", got.Data)
	}
	for _, i := range []int{1, 4} {
		b, _ := base64.StdEncoding.DecodeString(c[i].Get("content.data").String())
		if r := decodePNG(t, b).Bounds(); r.Dx() != 100 || r.Dy() != 50 {
			t.Fatalf("image %d is %v, want 100×50", i, r)
		}
		if c[i].Get("content.mimeType").String() != "image/png" {
			t.Fatalf("image %d lost its mime type", i)
		}
	}
	if c[2].Get("content.data").String() != base64.StdEncoding.EncodeToString(jb.Bytes()) {
		t.Fatal("the jpeg changed")
	}
	if c[3].Get("content.data").String() != base64.StdEncoding.EncodeToString(small) {
		t.Fatal("the small png changed")
	}
	// Everything outside the replaced strings is byte for byte the same.
	want := string(ev.Data)
	for _, i := range []int{1, 4} {
		want = strings.Replace(want, base64.StdEncoding.EncodeToString(big), c[i].Get("content.data").String(), 1)
	}
	if string(got.Data) != want {
		t.Fatal("bytes outside the images changed")
	}

	// Unchanged: within the bound, not a tool result, a broken image.
	if e := ShrinkEvent(ev, 1568); !bytes.Equal(e.Data, ev.Data) {
		t.Fatal("within the bound: changed")
	}
	other := event.New(event.ToolUse, 1, map[string]any{"x": "image/png"})
	if e := ShrinkEvent(other, 10); !bytes.Equal(e.Data, other.Data) {
		t.Fatal("tool_use changed")
	}
	broken := toolResult(t, imageBlock("image/png", []byte("not a png at all")))
	if e := ShrinkEvent(broken, 10); !bytes.Equal(e.Data, broken.Data) {
		t.Fatal("a broken image changed")
	}
}

func BenchmarkShrinkPNG(b *testing.B) {
	img := fill(3000, 2000, func(x, y int) color.NRGBA { return color.NRGBA{uint8(x), uint8(y), uint8(x + y), 255} })
	var buf bytes.Buffer
	_ = png.Encode(&buf, img)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, changed, err := ShrinkPNG(buf.Bytes(), 1568); !changed || err != nil {
			b.Fatal(changed, err)
		}
	}
}
