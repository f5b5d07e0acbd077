// JDBC with pgjdbc (block java/Users.java): the ID as a long, exactly the
// database's; in JSON through Jackson as a string with ToStringSerializer
// (without it, a number); and Spring's way of reading a generated key,
// prepareStatement(sql, new String[] {"id"}), which pgjdbc turns into
// INSERT ... RETURNING "id".
import com.fasterxml.jackson.databind.ObjectMapper;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;

public class UsersCheck {
    static int failures = 0;

    static void check(String what, boolean cond, Object got) {
        if (cond) {
            System.out.println("ok: JDBC: " + what);
        } else {
            failures++;
            System.out.println("not ok: JDBC: " + what + " (got " + got + ")");
        }
    }

    public static class Plain {
        public long id;
    }

    public static void main(String[] args) throws Exception {
        String url = "jdbc:postgresql://" + System.getenv("PGHOST") + ":" + System.getenv("PGPORT")
                + "/" + System.getenv("PGDATABASE") + "?user=" + System.getenv("PGUSER");
        try (Connection conn = DriverManager.getConnection(url)) {
            long id = Users.addUser(conn, "pia");
            check("INSERT ... RETURNING id gives a long above 2^53", id > (1L << 53), id);
            try (PreparedStatement st = conn.prepareStatement(
                    "SELECT t.id::text, d.datacenter_id, d.worker_id FROM users t,"
                    + " idgen_snowflake_decode(t.id) d WHERE t.id = ?::text::bigint")) {
                st.setString(1, Long.toString(id));
                try (ResultSet rs = st.executeQuery()) {
                    boolean found = rs.next();
                    check("the long is the database's ID, exactly",
                            found && rs.getString(1).equals(Long.toString(id)), id);
                    check("it decodes to datacenter 1, worker 7",
                            found && rs.getInt(2) == 1 && rs.getInt(3) == 7, id);
                }
            }
            Users.User u = Users.getUser(conn, id);
            check("a query by the long finds the row", u.id == id && u.name.equals("pia"), u.name);
            ObjectMapper json = new ObjectMapper();
            String js = json.writeValueAsString(u);
            check("Jackson with ToStringSerializer writes the ID as a string",
                    js.equals("{\"id\":\"" + id + "\",\"name\":\"pia\"}"), js);
            Plain p = new Plain();
            p.id = id;
            String plain = json.writeValueAsString(p);
            check("without it Jackson writes a number", plain.equals("{\"id\":" + id + "}"), plain);
            try (PreparedStatement st = conn.prepareStatement(
                    "INSERT INTO users (name) VALUES (?)", new String[] {"id"})) {
                st.setString(1, "quinn");
                st.executeUpdate();
                try (ResultSet rs = st.getGeneratedKeys()) {
                    check("getGeneratedKeys with the key's name gives the new ID",
                            rs.next() && rs.getLong(1) > id, id);
                }
            }
            try (PreparedStatement st = conn.prepareStatement("SELECT idgen_gene(?)")) {
                st.setLong(1, id);
                try (ResultSet rs = st.executeQuery()) {
                    check("an idgen function takes the long as its parameter", rs.next() && rs.getLong(1) == 0, id);
                }
            }
        }
        System.exit(failures == 0 ? 0 : 1);
    }
}
