package bench

import "testing"

func TestRoundRatios(t *testing.T) {
	got := roundRatios([]float64{90, 100, 50}, []float64{100, 80, 0, 70})
	if want := "0.90×, 1.25×"; got != want {
		t.Errorf("roundRatios: %q, want %q (a round without calls on the second side skipped)", got, want)
	}
}
