// slidewin from Go with go-redis (go get github.com/redis/go-redis/v9).
//
//	go run examples/go/sms.go        (a server with the module on 127.0.0.1:6379)
//
// SLIDEWIN.CHECK with DETAIL; a denial becomes HTTP 429 with Retry-After.
// On Redis Cluster use redis.NewClusterClient and a hash tag ({user:42}) in
// keys that one SLIDEWIN.MCHECK judges together.
package main

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// smsAllowed returns the HTTP status and Retry-After for one SMS code request.
func smsAllowed(ctx context.Context, rdb *redis.Client, ip string) (int, string, error) {
	// [allowed, limit, remaining, retry_after_ms, reset_after_ms]
	v, err := rdb.Do(ctx, "SLIDEWIN.CHECK", "sms:limit:"+ip, 5, 60000, "DETAIL").Int64Slice()
	if err != nil {
		return 0, "", err
	}
	if v[0] == 1 {
		return http.StatusOK, "", nil
	}
	if v[3] < 0 {
		return http.StatusTooManyRequests, "never", nil
	}
	return http.StatusTooManyRequests, strconv.FormatInt((v[3]+999)/1000, 10), nil
}

func main() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	for i := 0; i < 6; i++ {
		status, retry, err := smsAllowed(ctx, rdb, "203.0.113.7")
		if err != nil {
			panic(err)
		}
		fmt.Println(status, retry)
	}
}
