package race

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var _ = []any{bytes.NewReader, context.Background, json.Marshal, errors.New, fmt.Sprint, os.Exit,
	slices.Sort[[]int], sort.Ints, strconv.Itoa, strings.Fields, new(sync.Mutex), new(atomic.Int64), time.Now}

func TestSeed(t *testing.T) {}
