package parse

import "testing"

func TestSize(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    int64
		wantErr bool
	}{
		{"plain", "42", 42, false},
		{"bytes", "7B", 7, false},
		{"kibibytes", "10KiB", 10240, false},
		{"mebibytes", " 2MiB ", 2 << 20, false},
		{"gibibytes", "1GiB", 1 << 30, false},
		{"empty", "", 0, true},
		{"bad number", "tenKiB", 0, true},
		{"negative", "-1", -1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Size(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Size(%q) error = %v, wantErr %v", tt.in, err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("Size(%q) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

func TestSizeParallel(t *testing.T) {
	for _, in := range []string{"1B", "2B", "3B"} {
		t.Run(in, func(t *testing.T) {
			t.Parallel()
			if _, err := Size(in); err != nil {
				t.Error(err)
			}
		})
	}
}
