package main

import (
	"bufio"
	"bytes"
	"cmp"
	"container/heap"
	"container/list"
	"context"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"iter"
	"log"
	"log/slog"
	"maps"
	"math"
	"math/big"
	mrand "math/rand"
	rand2 "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"text/template"
	"time"
	"unicode"
	"unicode/utf8"
)

var _ = []any{bufio.NewReader, bytes.NewReader, cmp.Compare[int], heap.Init, list.New,
	context.Background, md5.New, rand.Read, sha256.New, base64.StdEncoding, csv.NewReader,
	hex.EncodeToString, json.Marshal, errors.New, flag.Parse, io.Copy, iter.Pull[int], log.Println,
	slog.Info, maps.Keys[map[int]int], math.Abs, big.NewInt, mrand.Intn, rand2.IntN, http.Get,
	httptest.NewServer, url.Parse, os.Exit, exec.Command, filepath.Join, regexp.MustCompile,
	slices.Sort[[]int], sort.Ints, strconv.Itoa, strings.Fields, new(sync.Mutex), new(atomic.Int64),
	tabwriter.NewWriter, template.New, time.Now, unicode.IsLetter, utf8.RuneLen}

func main() { fmt.Println("hello, world") }
