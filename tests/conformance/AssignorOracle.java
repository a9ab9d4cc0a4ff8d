/*
 * Test oracle: runs the official Apache Kafka Java client assignors (kafka-clients) on cases given
 * as JSON lines on stdin and prints one JSON line per case on stdout, in the same order.
 *
 *   in:  {"id": "c1", "strategy": "range"|"roundrobin"|"sticky"|"cooperative-sticky",
 *         "topics": {"t0": 3}, "members": [{"id": "C0", "topics": ["t0"], "owned": [["t0", 0]],
 *         "generation": 3, "rack": "r1", "instance_id": "i0"}], "partition_racks": {"t0:0": ["r1"]}}
 *   out: {"id": "c1", "assignment": {"C0": [["t0", 0], ...]}}   or   {"id": "c1", "error": "..."}
 *
 * Members are presented the way a real consumer (ConsumerCoordinator.metadata()) presents itself:
 * each member gets a fresh assignor instance; if it had a previous round (owned partitions or a
 * generation) the instance is told so through onAssignment(Assignment, ConsumerGroupMetadata), and
 * the Subscription's userData is whatever that instance's subscriptionUserData() returns. So the
 * eager StickyAssignor gets its previous assignment + generation in its own userData format and an
 * empty ownedPartitions list (eager members revoke everything before they rejoin), while
 * CooperativeStickyAssignor gets ownedPartitions + generationId on the Subscription itself.
 * A member with owned partitions but no generation is taken to be of generation 1; a member with
 * neither is a new member (generation -1, DEFAULT_GENERATION).
 *
 * Flags: --repeat N runs every case N timed times (after --warmup W untimed runs, default W = N)
 * and adds "nanos": the median wall time of ConsumerPartitionAssignor.assign() alone,
 * "runs_nanos": each timed run's, and "stable": whether all runs gave the same assignment.
 */

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedOutputStream;
import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.TreeSet;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Assignment;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.GroupAssignment;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.GroupSubscription;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.consumer.RoundRobinAssignor;
import org.apache.kafka.clients.consumer.StickyAssignor;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;

public final class AssignorOracle {
    private static final ObjectMapper MAPPER = new ObjectMapper();
    private static final int NEW_MEMBER_GENERATION = -1; // AbstractStickyAssignor.DEFAULT_GENERATION
    private static final int OWNED_WITHOUT_GENERATION = 1;
    private static final Comparator<TopicPartition> BY_TOPIC_PARTITION =
            Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition);

    private AssignorOracle() {}

    /** One member of a case. */
    private static final class Member {
        String id;
        List<String> topics = new ArrayList<>();
        List<TopicPartition> owned = new ArrayList<>();
        Integer generation;
        String rack;
        String instanceId;
    }

    /** One parsed case. */
    private static final class Case {
        String strategy;
        Map<String, Integer> topics = new LinkedHashMap<>();
        List<Member> members = new ArrayList<>();
        Map<TopicPartition, List<String>> partitionRacks; // null: no rack information at all
    }

    /** What one assign() call gives: inputs are rebuilt per call, only assign() is timed. */
    private static final class Run {
        Map<String, List<TopicPartition>> assignment;
        long nanos;
    }

    public static void main(String[] args) throws Exception {
        int repeat = 0;
        int warmup = -1;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--repeat": repeat = Integer.parseInt(args[++i]); break;
                case "--warmup": warmup = Integer.parseInt(args[++i]); break;
                default: throw new IllegalArgumentException("unknown argument: " + args[i]);
            }
        }
        if (warmup < 0) warmup = repeat;
        // The protocol owns the real stdout; anything a library prints goes to stderr instead.
        PrintStream out = new PrintStream(
                new BufferedOutputStream(new FileOutputStream(FileDescriptor.out)), false, StandardCharsets.UTF_8);
        System.setOut(System.err);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) continue;
            out.println(MAPPER.writeValueAsString(handle(line, repeat, warmup)));
            out.flush();
        }
        out.flush();
    }

    private static ObjectNode handle(String line, int repeat, int warmup) {
        ObjectNode result = MAPPER.createObjectNode();
        JsonNode id = null;
        try {
            JsonNode node = MAPPER.readTree(line);
            id = node.get("id");
            result.set("id", id);
            Case c = parse(node);
            Run run;
            if (repeat <= 0) {
                run = runOnce(c);
            } else {
                for (int i = 0; i < warmup; i++) runOnce(c);
                long[] nanos = new long[repeat];
                run = runOnce(c);
                nanos[0] = run.nanos;
                boolean stable = true;
                for (int i = 1; i < repeat; i++) {
                    Run again = runOnce(c);
                    nanos[i] = again.nanos;
                    stable &= again.assignment.equals(run.assignment);
                }
                ArrayNode runs = result.putArray("runs_nanos"); // in the order run
                for (long each : nanos) runs.add(each);
                Arrays.sort(nanos);
                long median = repeat % 2 == 1
                        ? nanos[repeat / 2]
                        : (nanos[repeat / 2 - 1] + nanos[repeat / 2]) / 2;
                result.put("nanos", median);
                result.put("stable", stable);
            }
            result.set("assignment", toJson(run.assignment));
        } catch (Throwable e) { // report and go on with the next case
            if (e instanceof VirtualMachineError && !(e instanceof StackOverflowError)) throw (VirtualMachineError) e;
            result.removeAll();
            result.set("id", id);
            result.put("error", e.getClass().getName() + ": " + e.getMessage());
        }
        return result;
    }

    private static ObjectNode toJson(Map<String, List<TopicPartition>> assignment) {
        ObjectNode members = MAPPER.createObjectNode();
        for (Map.Entry<String, List<TopicPartition>> e : assignment.entrySet()) {
            ArrayNode list = members.putArray(e.getKey());
            for (TopicPartition tp : e.getValue()) list.addArray().add(tp.topic()).add(tp.partition());
        }
        return members;
    }

    // ---------------------------------------------------------------- parsing

    private static Case parse(JsonNode node) {
        Case c = new Case();
        c.strategy = text(required(node, "strategy"), "strategy");
        JsonNode topics = required(node, "topics");
        if (!topics.isObject()) throw new IllegalArgumentException("'topics' must be an object");
        for (Map.Entry<String, JsonNode> e : topics.properties()) {
            if (!e.getValue().isInt() || e.getValue().intValue() < 0)
                throw new IllegalArgumentException("partition count of topic " + e.getKey() + " must be an int >= 0");
            c.topics.put(e.getKey(), e.getValue().intValue());
        }
        JsonNode members = required(node, "members");
        if (!members.isArray()) throw new IllegalArgumentException("'members' must be a list");
        LinkedHashSet<String> seen = new LinkedHashSet<>();
        for (JsonNode m : members) {
            Member member = new Member();
            member.id = text(required(m, "id"), "member id");
            if (!seen.add(member.id)) throw new IllegalArgumentException("duplicate member id " + member.id);
            JsonNode memberTopics = required(m, "topics");
            if (!memberTopics.isArray()) throw new IllegalArgumentException("member topics must be a list");
            for (JsonNode t : memberTopics) member.topics.add(text(t, "topic"));
            JsonNode owned = m.get("owned");
            if (owned != null && !owned.isNull()) {
                if (!owned.isArray()) throw new IllegalArgumentException("owned must be a list");
                for (JsonNode tp : owned) {
                    if (!tp.isArray() || tp.size() != 2 || !tp.get(1).isInt())
                        throw new IllegalArgumentException("owned partition must be [topic, partition]: " + tp);
                    member.owned.add(new TopicPartition(text(tp.get(0), "topic"), tp.get(1).intValue()));
                }
            }
            JsonNode generation = m.get("generation");
            if (generation != null && !generation.isNull()) {
                if (!generation.isInt()) throw new IllegalArgumentException("generation must be an int");
                member.generation = generation.intValue();
            }
            member.rack = optionalText(m, "rack");
            member.instanceId = optionalText(m, "instance_id");
            c.members.add(member);
        }
        JsonNode racks = node.get("partition_racks");
        if (racks != null && !racks.isNull()) {
            c.partitionRacks = new HashMap<>();
            if (!racks.isObject()) throw new IllegalArgumentException("'partition_racks' must be an object");
            for (Map.Entry<String, JsonNode> e : racks.properties()) {
                int colon = e.getKey().lastIndexOf(':');
                if (colon < 0) throw new IllegalArgumentException("partition_racks key must be 'topic:partition': " + e.getKey());
                String topic = e.getKey().substring(0, colon);
                int partition = Integer.parseInt(e.getKey().substring(colon + 1));
                Integer count = c.topics.get(topic);
                if (count == null || partition < 0 || partition >= count)
                    throw new IllegalArgumentException("partition_racks names a partition that does not exist: " + e.getKey());
                if (!e.getValue().isArray()) throw new IllegalArgumentException("racks of " + e.getKey() + " must be a list");
                List<String> list = new ArrayList<>();
                for (JsonNode r : e.getValue()) list.add(text(r, "rack"));
                c.partitionRacks.put(new TopicPartition(topic, partition), list);
            }
        }
        return c;
    }

    private static JsonNode required(JsonNode node, String field) {
        JsonNode value = node.get(field);
        if (value == null || value.isNull()) throw new IllegalArgumentException("missing field '" + field + "'");
        return value;
    }

    private static String text(JsonNode node, String what) {
        if (!node.isTextual()) throw new IllegalArgumentException(what + " must be a string: " + node);
        return node.textValue();
    }

    private static String optionalText(JsonNode node, String field) {
        JsonNode value = node.get(field);
        return value == null || value.isNull() ? null : text(value, field);
    }

    // ---------------------------------------------------------------- running

    private static ConsumerPartitionAssignor newAssignor(String strategy) {
        switch (strategy) {
            case "range": return new RangeAssignor();
            case "roundrobin": return new RoundRobinAssignor();
            case "sticky": return new StickyAssignor();
            case "cooperative-sticky": return new CooperativeStickyAssignor();
            default: throw new IllegalArgumentException("unknown strategy '" + strategy + "'");
        }
    }

    private static Run runOnce(Case c) {
        ConsumerPartitionAssignor assignor = newAssignor(c.strategy);
        Cluster cluster = cluster(c);
        GroupSubscription group = groupSubscription(c);
        long start = System.nanoTime();
        GroupAssignment assigned = assignor.assign(cluster, group);
        long nanos = System.nanoTime() - start;

        Map<String, List<TopicPartition>> result = new TreeMap<>();
        for (Member m : c.members) result.put(m.id, new ArrayList<>());
        for (Map.Entry<String, Assignment> e : assigned.groupAssignment().entrySet()) {
            List<TopicPartition> partitions = new ArrayList<>(e.getValue().partitions());
            partitions.sort(BY_TOPIC_PARTITION);
            result.put(e.getKey(), partitions);
        }
        Run run = new Run();
        run.assignment = result;
        run.nanos = nanos;
        return run;
    }

    /** Nodes: one rackless node, plus one node per rack named in partition_racks. */
    private static Cluster cluster(Case c) {
        Node rackless = new Node(0, "rackless", 9092);
        Map<String, Node> rackNodes = new LinkedHashMap<>();
        if (c.partitionRacks != null) {
            TreeSet<String> racks = new TreeSet<>();
            c.partitionRacks.values().forEach(racks::addAll);
            int id = 1;
            for (String rack : racks) {
                rackNodes.put(rack, new Node(id, "broker-" + id, 9092, rack));
                id++;
            }
        }
        List<Node> nodes = new ArrayList<>();
        nodes.add(rackless);
        nodes.addAll(rackNodes.values());
        List<PartitionInfo> partitions = new ArrayList<>();
        for (Map.Entry<String, Integer> topic : c.topics.entrySet()) {
            for (int p = 0; p < topic.getValue(); p++) {
                TopicPartition tp = new TopicPartition(topic.getKey(), p);
                List<String> racks = c.partitionRacks == null ? null : c.partitionRacks.get(tp);
                Node[] replicas;
                if (racks == null || racks.isEmpty()) {
                    replicas = new Node[] {rackless};
                } else {
                    replicas = new LinkedHashSet<>(racks).stream().map(rackNodes::get).toArray(Node[]::new);
                }
                partitions.add(new PartitionInfo(tp.topic(), p, replicas[0], replicas, replicas));
            }
        }
        return new Cluster("oracle-cluster", nodes, partitions, Collections.emptySet(), Collections.emptySet());
    }

    @SuppressWarnings("removal") // ConsumerGroupMetadata's constructor: what the consumer itself calls
    private static GroupSubscription groupSubscription(Case c) {
        // A HashMap, as ConsumerCoordinator.onLeaderElected builds it: the sticky assignors
        // iterate it, so its order (hash buckets, then insertion) is part of Java's answer.
        Map<String, Subscription> subscriptions = new HashMap<>();
        for (Member m : c.members) {
            boolean hadRound = m.generation != null || !m.owned.isEmpty();
            int generation = m.generation != null ? m.generation
                    : m.owned.isEmpty() ? NEW_MEMBER_GENERATION : OWNED_WITHOUT_GENERATION;
            // This member's own assignor instance, told about its previous round as the consumer would be.
            ConsumerPartitionAssignor own = newAssignor(c.strategy);
            if (hadRound) {
                own.onAssignment(new Assignment(new ArrayList<>(m.owned)), new ConsumerGroupMetadata(
                        "oracle-group", generation, m.id, Optional.ofNullable(m.instanceId)));
            }
            ByteBuffer userData = own.subscriptionUserData(new LinkedHashSet<>(m.topics));
            // Eager members (range, roundrobin, sticky) revoke all partitions before rejoining, so
            // they report no owned partitions; cooperative members keep and report theirs.
            List<TopicPartition> owned = "cooperative-sticky".equals(c.strategy)
                    ? new ArrayList<>(m.owned) : Collections.emptyList();
            Subscription subscription = new Subscription(
                    new ArrayList<>(m.topics), userData, owned, generation, Optional.ofNullable(m.rack));
            subscription.setGroupInstanceId(Optional.ofNullable(m.instanceId));
            subscriptions.put(m.id, subscription);
        }
        return new GroupSubscription(subscriptions);
    }
}
