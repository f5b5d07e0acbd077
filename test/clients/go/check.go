// Go with pgx v4 (block go/users.go): the ID as an int64, exactly the
// database's, and in JSON as a string with the ",string" tag (without it,
// encoding/json writes a number).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
)

var failures int

func check(what string, cond bool, got interface{}) {
	if cond {
		fmt.Println("ok: Go pgx: " + what)
	} else {
		failures++
		fmt.Printf("not ok: Go pgx: %s (got %v)\n", what, got)
	}
}

func main() {
	ctx := context.Background()
	db, err := connect(ctx)
	if err != nil {
		fmt.Println("not ok: Go pgx: connect:", err)
		os.Exit(1)
	}
	defer db.Close()
	id, err := addUser(ctx, db, "olga")
	check("INSERT ... RETURNING id scans into an int64", err == nil && id > 1<<53, err)
	var text string
	var dc, worker int
	err = db.QueryRow(ctx, "SELECT t.id::text, d.datacenter_id, d.worker_id FROM users t,"+
		" idgen_snowflake_decode(t.id) d WHERE t.id = $1::text::bigint", strconv.FormatInt(id, 10)).
		Scan(&text, &dc, &worker)
	check("the int64 is the database's ID, exactly", err == nil && text == strconv.FormatInt(id, 10), text)
	check("it decodes to datacenter 1, worker 7", dc == 1 && worker == 7, fmt.Sprint(dc, worker))
	u, err := getUser(ctx, db, id)
	check("a query by the int64 finds the row", err == nil && u.ID == id && u.Name == "olga", err)
	js, _ := json.Marshal(u)
	check("the json:\"id,string\" tag writes the ID as a string",
		string(js) == fmt.Sprintf(`{"id":"%d","name":"olga"}`, id), string(js))
	plain, _ := json.Marshal(struct{ ID int64 }{id})
	check("without it encoding/json writes a number", string(plain) == fmt.Sprintf(`{"ID":%d}`, id), string(plain))
	var gene int64
	err = db.QueryRow(ctx, "SELECT idgen_gene($1)", id).Scan(&gene)
	check("an idgen function takes the int64 as its parameter", err == nil && gene == 0, err)
	if failures > 0 {
		os.Exit(1)
	}
}
